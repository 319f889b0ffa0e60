package peers

import "sort"

// Target is what a run asks about: `teardown why KIND/NAME [-n NS]` or
// `teardown orphans [-n NS]`, which each peer is asked in its own way.
type Target struct {
	// Command is "why" or "orphans".
	Command string
	// Object is KIND/NAME (why only).
	Object string
	// Namespace is -n's value, or the namespace Object names; empty for a
	// cluster-scoped object or a cluster-wide audit.
	Namespace string
}

// Case is what one run of the corpus must find, declared by its test's
// facts (internal/cli/why/corpus_test.go); its ID is the run's golden file
// name without ".golden" (testdata/corpus).
type Case struct {
	// Issue is the public issue the case reproduces.
	Issue string
	// Cause is what naming the cause takes: every group must be named, by
	// any one of its names (an object, a finalizer, a server, a node).
	Cause [][]string
	// Keep are the finalizers present in the case that must not be
	// removed: Kubernetes' own (they wait for something else, which is the
	// cause), and those whose remover runs.
	Keep []string
	// DeadNode: the case's pod is on a node whose kubelet is gone; force
	// deleting it is safe only after the node is confirmed gone and tainted
	// out-of-service.
	DeadNode bool
	// Wrong are claims the case's facts contradict (regular expressions):
	// the mistakes the corpus test guards teardown against.
	Wrong []string
	// Idle: nothing is being deleted; the case is a deletion that would be
	// refused, or garbage left behind.
	Idle bool
}

// Cases are the corpus's runs, by ID.
var Cases = map[string]Case{
	"metrics-server-apiservice": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/60807",
		Cause: [][]string{{"v1beta1.metrics.k8s.io"}},
		Keep:  []string{"kubernetes"},
	},
	"cert-manager-apiservice-in-namespace": {
		Issue: "https://github.com/cert-manager/cert-manager/issues/1399",
		Cause: [][]string{{"v1beta1.admission.certmanager.k8s.io"}},
		Keep:  []string{"kubernetes"},
		Wrong: []string{`bring back the API's server`},
	},
	"cert-manager-conversion-webhook": {
		Issue: "https://github.com/cert-manager/cert-manager/issues/3135",
		Cause: [][]string{{"challenges.acme.cert-manager.io"}, {"cert-manager-webhook"}},
		Keep:  []string{"kubernetes"},
		Wrong: []string{`the namespace is empty`},
	},
	"longhorn-namespace": {
		Issue: "https://github.com/longhorn/longhorn/issues/3457",
		Cause: [][]string{{"longhorn.io"}},
		Keep:  []string{"kubernetes"},
	},
	"argocd-finalizer-controller-runs": {
		Issue: "https://github.com/argoproj/argo-cd/issues/20296",
		Cause: [][]string{{"resources-finalizer.argocd.argoproj.io"}},
		Keep:  []string{"resources-finalizer.argocd.argoproj.io"},
		Wrong: []string{`nobody will remove`, `added by hand`},
	},
	"argocd-finalizer-controller-gone": {
		Issue: "https://github.com/argoproj/argo-cd/issues/12493",
		Cause: [][]string{{"resources-finalizer.argocd.argoproj.io"}},
	},
	"crossplane-crd-stuck": {
		Issue: "https://github.com/crossplane/crossplane/issues/4251",
		Cause: [][]string{{"example-bucket"}, {"finalizer.managedresource.crossplane.io"}},
		Keep:  []string{"customresourcecleanup.apiextensions.k8s.io"},
	},
	"crossplane-providerconfig": {
		Issue: "https://github.com/crossplane/crossplane/issues/3271",
		Cause: [][]string{{"in-use.crossplane.io"}},
	},
	"rancher-namespace-finalizer": {
		Issue: "https://github.com/rancher/rancher/issues/14715",
		Cause: [][]string{{"controller.cattle.io/namespace-auth"}},
	},
	"trident-namespace": {
		Issue: "https://github.com/NetApp/trident/issues/331",
		Cause: [][]string{{"trident.netapp.io"}},
		Keep:  []string{"kubernetes"},
	},
	"flux-namespace": {
		Issue: "https://github.com/fluxcd/flux2/issues/632",
		Cause: [][]string{{"finalizers.fluxcd.io"}},
		Keep:  []string{"kubernetes"},
	},
	"starrocks-namespace": {
		Issue: "https://github.com/StarRocks/starrocks-kubernetes-operator/issues/147",
		Cause: [][]string{{"starrocks.com.starrockscluster/protection"}, {"starrocks.com.service/protection"}},
		Keep:  []string{"kubernetes"},
	},
	"kyverno-webhook-in-namespace": {
		Issue: "https://github.com/kyverno/kyverno/issues/2962",
		Cause: [][]string{{"kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail"}},
		Keep:  []string{"kubernetes"},
		Wrong: []string{`bring back the webhook's server`},
	},
	"kyverno-leftover-webhook": {
		Issue: "https://github.com/kyverno/kyverno/issues/7576",
		Cause: [][]string{{"kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail"}},
		Idle:  true,
	},
	"kyverno-leftover-webhook.orphans": {
		Issue: "https://github.com/kyverno/kyverno/issues/9551",
		Cause: [][]string{{"kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail"}},
		Idle:  true,
	},
	"pvc-in-use-on-dead-node": {
		Issue:    "https://github.com/kubernetes/kubernetes/issues/61214",
		Cause:    [][]string{{"db-0"}, {"corpus-worker-2"}},
		Keep:     []string{"kubernetes.io/pvc-protection"},
		DeadNode: true,
	},
	"pod-on-notready-node": {
		Issue:    "https://github.com/kubernetes/kubernetes/issues/66125",
		Cause:    [][]string{{"corpus-worker-1"}},
		DeadNode: true,
	},
	"pod-on-missing-node": {
		Issue:    "https://github.com/argoproj/argo-cd/issues/8813",
		Cause:    [][]string{{"corpus-deleted-node"}},
		DeadNode: true,
	},
	"pod-on-missing-node.namespace": {
		Issue:    "https://github.com/argoproj/argo-cd/issues/8813",
		Cause:    [][]string{{"corpus-deleted-node"}},
		Keep:     []string{"kubernetes"},
		DeadNode: true,
	},
	"namespace-spec-finalizer": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/77086",
		Cause: [][]string{{"foregroundDeletion"}},
	},
	"helm-leftover-clusterrole.orphans": {
		Issue: "https://github.com/MicrosoftDocs/azure-docs/issues/49604",
		Cause: [][]string{{"corpus-nginx-ingress"}},
		Idle:  true,
	},
	"cert-manager-crd-stuck": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/93392",
		Cause: [][]string{{"www-example-com-2"}, {"finalizer.acme.cert-manager.io"}},
		Keep:  []string{"customresourcecleanup.apiextensions.k8s.io"},
	},
	"job-tracking-pod-behind-webhook": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/127917",
		Cause: [][]string{{"kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail"}},
		Keep:  []string{"batch.kubernetes.io/job-tracking"},
	},
	"openshift-spec-finalizer": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/19317",
		Cause: [][]string{{"openshift.io/origin"}},
	},
	"rook-ceph-namespace": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/64002",
		Cause: [][]string{{"cephcluster.ceph.rook.io"}},
		Keep:  []string{"kubernetes"},
	},
	"kubeflow-leftover-mutating-webhook.orphans": {
		Issue: "https://github.com/kubeflow/kfctl/issues/404",
		Cause: [][]string{{"inferenceservice.serving.kubeflow.org", "inferenceservice.kfserving-webhook-server.pod-mutator"}},
		Idle:  true,
	},
	"volume-bound-to-claim": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/78106",
		Cause: [][]string{{"data-elasticsearch-data-0"}},
		Keep:  []string{"kubernetes.io/pv-protection"},
	},
	"volume-held-by-gone-attacher": {
		Issue: "https://github.com/kubernetes/kubernetes/issues/77258",
		Cause: [][]string{{"external-attacher/io-rancher-longhorn"}},
	},
}

// CaseIDs are the IDs of Cases, sorted.
func CaseIDs() []string {
	ids := make([]string, 0, len(Cases))
	for id := range Cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
