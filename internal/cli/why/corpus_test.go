//go:build integration

package why_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/peers"
)

// The corpus: stuck deletions and garbage reported in public issue
// trackers, each reproduced here with the same root cause, and what `why`
// answers (testdata/corpus/*.golden, rewritten with -args -update): the
// cause named, the advice safe, exit code 1 while something holds.

// whyCase runs `teardown why args`, wants exit code 1 and safe advice, and
// compares the answer with its golden file.
func whyCase(t *testing.T, golden string, args ...string) string {
	t.Helper()
	code, out, stderr := env.Run(t, append([]string{"why"}, args...)...)
	recordPeers(t, strings.TrimSuffix(golden, ".golden"), whyTarget(args), append([]string{"why"}, args...), code, out+stderr)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d (something holds); stderr %q", code, cmdutil.ExitFinding, stderr)
	}
	doctortest.AssertSafe(t, out)
	doctortest.Golden(t, golden, out)
	doctortest.RunAdvice(t, env.Kubeconfig, out, adviceFails)
	return out
}

// adviceFails are the advised commands that fail by design, with what
// their output then says: the check of a node that no longer exists.
var adviceFails = map[string]string{
	"kubectl get node corpus-deleted-node": `nodes "corpus-deleted-node" not found`,
}

// namespaceState waits until the namespace satisfies ok.
func namespaceState(t *testing.T, ns, what string, ok func(*corev1.Namespace) bool) {
	t.Helper()
	doctortest.WaitFor(t, "namespace "+ns+": "+what, func(ctx context.Context) bool {
		n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil && ok(n)
	})
}

// deletingObject waits until the object has a deletionTimestamp.
func deletingObject(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	doctortest.WaitFor(t, gvr.Resource+" "+name+" being deleted", func(ctx context.Context) bool {
		o, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && o.GetDeletionTimestamp() != nil
	})
}

// https://github.com/kubernetes/kubernetes/issues/60807,
// https://github.com/kubernetes/kubernetes/issues/83332: metrics-server is
// gone, its APIService stays, and every namespace being deleted waits on
// the failing discovery of metrics.k8s.io/v1beta1.
func TestCorpusMetricsServerAPIService(t *testing.T) {
	const ns = "corpus-metrics"
	env.MissingServiceAPIService(t, "metrics.k8s.io", "v1beta1", "kube-system", "metrics-server")
	env.CreateNamespace(t, ns, nil)
	env.DeleteNamespace(t, ns, "NamespaceDeletionDiscoveryFailure")
	out := whyCase(t, "metrics-server-apiservice.golden", "namespace/"+ns)
	if strings.Count(out, "[BLOCKING]") != 1 {
		t.Errorf("one cause, want one BLOCKING finding:\n%s", out)
	}
	// orphans reports the leftover APIService, and how to delete it.
	_, out, _ = env.Run(t, "orphans")
	apiservices := section(out, "APIService without a server")
	if !strings.Contains(apiservices, "kubectl delete apiservice v1beta1.metrics.k8s.io") {
		t.Errorf("orphans does not advise deleting the leftover APIService:\n%s", out)
	}
	doctortest.RunAdvice(t, env.Kubeconfig, apiservices, nil)
}

// https://github.com/cert-manager/cert-manager/issues/1399,
// https://github.com/kdcllc/Bet.AspNetCore/issues/146: the cert-manager
// namespace is deleted with the webhook that served its APIService; the
// server cannot come back in a Terminating namespace, so the first advice
// is not "bring it back".
func TestCorpusCertManagerAPIServiceInDeletedNamespace(t *testing.T) {
	const ns = "corpus-cert-manager"
	env.CreateNamespace(t, ns, nil)
	env.MissingServiceAPIService(t, "admission.certmanager.k8s.io", "v1beta1", ns, "cert-manager-webhook")
	env.DeleteNamespace(t, ns, "NamespaceDeletionDiscoveryFailure")
	out := whyCase(t, "cert-manager-apiservice-in-namespace.golden", "namespace/"+ns)
	if strings.Contains(out, "bring back the API's server") {
		t.Error("advises bringing back a server that lived in the namespace being deleted")
	}
}

// https://github.com/cert-manager/cert-manager/issues/3135: cert-manager
// was removed from ns1 before an ACME Challenge was solved; listing
// Challenges fails on the CRD's conversion webhook, which lived in ns1.
func TestCorpusCertManagerConversionWebhook(t *testing.T) {
	const ns = "corpus-acme"
	ctx := t.Context()
	crd := doctortest.CRD("acme.cert-manager.io", "Challenge", "challenges", true, "v1alpha2")
	gvr := env.EnsureCRDOf(t, crd)
	t.Cleanup(func() {
		_ = env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
		// TestCorpusCertManagerCRDStuckOnChallenge creates it afresh.
		doctortest.WaitGone(t, "customresourcedefinition "+crd.Name, func(ctx context.Context) error {
			_, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			return err
		})
	})
	env.CreateNamespace(t, ns, nil)
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "acme.cert-manager.io/v1alpha2", "kind": "Challenge", "metadata": map[string]any{"name": "www-example-com-1"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// cert-manager's upgrade: v1 becomes the storage version, stored
	// v1alpha2 objects are converted by the webhook of the release in ns.
	cur, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions[0].Storage = false
	cur.Spec.Versions = append(cur.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Storage: true, Schema: cur.Spec.Versions[0].Schema})
	cur.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: "cert-manager-webhook", Path: new("/convert")}},
	}}
	if _, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd.Name, metav1.GetOptions{})
		if err == nil {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			_, _ = env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), c, metav1.UpdateOptions{})
		}
	})
	env.DeleteNamespace(t, ns, "NamespaceDeletionContentFailure")
	out := whyCase(t, "cert-manager-conversion-webhook.golden", "namespace/"+ns)
	if strings.Contains(out, "the namespace is empty but") {
		t.Error("a kind that cannot be listed is reported as an empty namespace")
	}
}

// https://github.com/longhorn/longhorn/issues/3457,
// https://github.com/longhorn/longhorn/issues/1529: longhorn-system is
// deleted with longhorn-manager in it; its custom resources keep the
// finalizer longhorn.io that only longhorn-manager removes.
func TestCorpusLonghornNamespace(t *testing.T) {
	namespaceHeldByOperator(t, "corpus-longhorn", doctortest.CRD("longhorn.io", "Replica", "replicas", true, "v1beta2"),
		"longhorn-manager", "longhorn.io", "longhorn-namespace.golden", "pvc-1-r-07001148", "pvc-1-r-14c0f332")
}

// namespaceHeldByOperator: namespace ns holds objects of crd called names,
// each with finalizer added by the operator manager (its own update), and
// the operator is gone; the namespace is deleted, and why on it compared
// with golden.
func namespaceHeldByOperator(t *testing.T, ns string, crd *apiextensionsv1.CustomResourceDefinition, manager, finalizer, golden string, names ...string) {
	t.Helper()
	gvr := env.EnsureCRDOf(t, crd)
	env.CreateNamespace(t, ns, nil)
	for _, n := range names {
		env.CreateHeld(t, gvr, crd.Spec.Names.Kind, ns, n, manager, false, finalizer)
	}
	env.DeleteNamespace(t, ns, "NamespaceFinalizersRemaining")
	whyCase(t, golden, "namespace/"+ns)
}

// argoApplication is Argo CD's Application kind.
func argoApplication(t *testing.T) schema.GroupVersionResource {
	return env.EnsureCRDOf(t, doctortest.CRD("argoproj.io", "Application", "applications", true, "v1alpha1"))
}

// https://github.com/argoproj/argo-cd/issues/20296: a Kyverno policy wrote
// resources-finalizer.argocd.argoproj.io onto an Application; Argo CD's
// application controller honours it and runs. Not "added by hand, nobody
// removes it": the advice must not be to remove it.
func TestCorpusArgoCDFinalizerWhileControllerRuns(t *testing.T) {
	const ns = "corpus-argocd"
	ctx := t.Context()
	gvr := argoApplication(t)
	env.CreateNamespace(t, ns, nil)
	sts, err := env.Kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-application-controller"},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "argocd-application-controller"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "argocd-application-controller"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "argocd-application-controller", Image: "argocd"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AppsV1().StatefulSets(ns).Delete(context.Background(), sts.Name, metav1.DeleteOptions{})
	})
	// No kubelet runs: report the controller ready, as its kubelet would.
	sts.Status.Replicas, sts.Status.ReadyReplicas = 1, 1
	if _, err := env.Kube.AppsV1().StatefulSets(ns).UpdateStatus(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.CreateHeld(t, gvr, "Application", ns, "test-app", "kyverno", false, "resources-finalizer.argocd.argoproj.io")
	if err := env.Dynamic.Resource(gvr).Namespace(ns).Delete(ctx, "test-app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, gvr, ns, "test-app")
	out := whyCase(t, "argocd-finalizer-controller-runs.golden", "application.argoproj.io/test-app", "-n", ns)
	if strings.Contains(out, "kubectl patch") {
		t.Error("advises removing a finalizer whose controller runs")
	}
}

// https://github.com/argoproj/argo-cd/issues/12493,
// https://github.com/argoproj/argo-cd/issues/11145: the Application's
// manifest carries resources-finalizer.argocd.argoproj.io (as Argo CD
// documents), and Argo CD is gone: the finalizer's remover is known from
// the table, not from who wrote it.
func TestCorpusArgoCDFinalizerControllerGone(t *testing.T) {
	const ns = "corpus-argocd-gone"
	ctx := t.Context()
	gvr := argoApplication(t)
	env.CreateNamespace(t, ns, nil)
	env.CreateHeld(t, gvr, "Application", ns, "guestbook", "kubectl-client-side-apply", false, "resources-finalizer.argocd.argoproj.io")
	if err := env.Dynamic.Resource(gvr).Namespace(ns).Delete(ctx, "guestbook", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, gvr, ns, "guestbook")
	whyCase(t, "argocd-finalizer-controller-gone.golden", "application.argoproj.io/guestbook", "-n", ns)
}

// https://github.com/crossplane/crossplane/issues/4251: the provider was
// deleted before its managed resources; the managed resource's CRD is
// stuck on customresourcecleanup.apiextensions.k8s.io because a managed
// resource keeps finalizer.managedresource.crossplane.io. why on the CRD
// names that resource and its dead finalizer, and never advises removing
// the CRD's own finalizer (its objects would come back with the CRD).
func TestCorpusCrossplaneCRDStuckOnManagedResource(t *testing.T) {
	ctx := t.Context()
	crd := doctortest.CRD("s3.aws.upbound.io", "Bucket", "buckets", false, "v1beta1")
	gvr := env.EnsureCRDOf(t, crd)
	env.CreateHeld(t, gvr, "Bucket", "", "example-bucket", "provider-aws-s3", false, "finalizer.managedresource.crossplane.io")
	if err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, gvr, "", "example-bucket")
	out := whyCase(t, "crossplane-crd-stuck.golden", "customresourcedefinition/"+crd.Name)
	if !strings.Contains(out, "bucket.s3.aws.upbound.io/example-bucket") {
		t.Error("the custom resource that holds the definition is not named")
	}
}

// https://github.com/crossplane/crossplane/issues/3271,
// https://github.com/crossplane-contrib/provider-helm/issues/102: a
// ProviderConfig keeps in-use.crossplane.io after its provider is gone.
func TestCorpusCrossplaneProviderConfigInUse(t *testing.T) {
	ctx := t.Context()
	gvr := env.EnsureCRDOf(t, doctortest.CRD("helm.crossplane.io", "ProviderConfig", "providerconfigs", false, "v1beta1"))
	env.CreateHeld(t, gvr, "ProviderConfig", "", "helm-provider", "crossplane-helm-provider", false, "in-use.crossplane.io")
	if err := env.Dynamic.Resource(gvr).Delete(ctx, "helm-provider", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, gvr, "", "helm-provider")
	whyCase(t, "crossplane-providerconfig.golden", "providerconfig.helm.crossplane.io/helm-provider")
}

// https://github.com/rancher/rancher/issues/14715,
// https://github.com/rancher/rancher/issues/36450: Rancher is removed and
// the namespaces it managed keep controller.cattle.io/namespace-auth in
// their own metadata.finalizers.
func TestCorpusRancherNamespaceFinalizer(t *testing.T) {
	const ns = "corpus-cattle-system"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Finalizers = []string{"controller.cattle.io/namespace-auth"}
	if _, err := env.Kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{FieldManager: "rancher"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Kube.CoreV1().Namespaces().Patch(context.Background(), ns, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	env.DeleteNamespace(t, ns, "")
	namespaceState(t, ns, "content gone, spec.finalizers empty", func(n *corev1.Namespace) bool { return len(n.Spec.Finalizers) == 0 })
	whyCase(t, "rancher-namespace-finalizer.golden", "namespace/"+ns)
}

// https://github.com/NetApp/trident/issues/331: after tridentctl
// uninstall, the trident namespace is stuck on Trident's custom resources
// and their finalizer trident.netapp.io.
func TestCorpusTridentNamespace(t *testing.T) {
	namespaceHeldByOperator(t, "corpus-trident", doctortest.CRD("trident.netapp.io", "TridentVersion", "tridentversions", true, "v1"),
		"trident_orchestrator", "trident.netapp.io", "trident-namespace.golden", "trident")
}

// https://github.com/fluxcd/flux2/issues/632,
// https://github.com/fluxcd/terraform-provider-flux/issues/67: Flux's
// controllers are deleted before its objects; finalizers.fluxcd.io keeps
// flux-system Terminating.
func TestCorpusFluxNamespace(t *testing.T) {
	namespaceHeldByOperator(t, "corpus-flux-system", doctortest.CRD("kustomize.toolkit.fluxcd.io", "Kustomization", "kustomizations", true, "v1"),
		"kustomize-controller", "finalizers.fluxcd.io", "flux-namespace.golden", "flux-system")
}

// https://github.com/StarRocks/starrocks-kubernetes-operator/issues/147:
// the operator's Helm release is uninstalled; its Services and its
// StarRocksCluster keep the operator's protection finalizers.
func TestCorpusStarRocksNamespace(t *testing.T) {
	const ns = "corpus-starrocks"
	ctx := t.Context()
	gvr := env.EnsureCRDOf(t, doctortest.CRD("starrocks.com", "StarRocksCluster", "starrocksclusters", true, "v1"))
	env.CreateNamespace(t, ns, nil)
	env.CreateHeld(t, gvr, "StarRocksCluster", ns, "kube-starrocks", "starrocks", false, "starrocks.com.starrockscluster/protection")
	for _, name := range []string{"kube-starrocks-fe-service", "kube-starrocks-be-service"} {
		// Headless: no cluster IP is allocated.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"starrocks.com.service/protection"}},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 9030}}}}
		if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{FieldManager: "starrocks"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			env.ClearFinalizers(schema.GroupVersionResource{Version: "v1", Resource: "services"}, ns, name)
		})
	}
	env.DeleteNamespace(t, ns, "NamespaceFinalizersRemaining")
	whyCase(t, "starrocks-namespace.golden", "namespace/"+ns)
}

// https://github.com/kyverno/kyverno/issues/2962: Kyverno's fail-closed
// webhook refuses requests once its server is gone; here its own
// namespace is deleted with the server in it, so the namespace controller
// cannot delete the content the webhook guards, and the server cannot
// come back there.
func TestCorpusKyvernoWebhookInDeletedNamespace(t *testing.T) {
	const ns = "corpus-kyverno"
	ctx := t.Context()
	env.CreateNamespace(t, ns, map[string]string{"corpus": ns})
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kyverno"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failClosedWebhook(t, "kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail", ns, "kyverno-svc", ns,
		[]admissionv1.OperationType{admissionv1.Delete}, "configmaps")
	env.DeleteNamespace(t, ns, "NamespaceDeletionContentFailure")
	out := whyCase(t, "kyverno-webhook-in-namespace.golden", "namespace/"+ns)
	if strings.Contains(out, "bring back the webhook's server") {
		t.Error("advises bringing back a server that lived in the namespace being deleted")
	}
}

// failClosedWebhook registers a fail-closed validating webhook whose
// server is the Service svcNS/svc, which does not exist, for ops on
// resources in the namespaces labelled corpus=selector; it is deleted at
// the end of the test.
func failClosedWebhook(t *testing.T, cfg, name, svcNS, svc, selector string, ops []admissionv1.OperationType, resources ...string) {
	t.Helper()
	ctx := t.Context()
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfg},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    name,
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: svcNS, Name: svc, Path: new("/validate/fail")}},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: ops, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"corpus": selector}},
		}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
}

// https://github.com/kyverno/kyverno/issues/7576,
// https://github.com/kyverno/kyverno/issues/9551: Kyverno is uninstalled
// and leaves its fail-closed webhook configuration behind; every request
// it matches is refused. why names it on an object whose deletion it
// refuses, and orphans flags it as refusing requests cluster-wide now.
func TestCorpusKyvernoLeftoverWebhook(t *testing.T) {
	const ns = "corpus-kyverno-leftover"
	ctx := t.Context()
	env.CreateNamespace(t, ns, map[string]string{"corpus": ns})
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failClosedWebhook(t, "kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail", "kyverno", "kyverno-svc", ns,
		[]admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, "configmaps")
	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err == nil {
		t.Fatal("the leftover webhook did not refuse the delete")
	}
	whyCase(t, "kyverno-leftover-webhook.golden", "configmap/settings", "-n", ns)

	code, out, stderr := env.Run(t, "orphans", "-n", ns)
	recordPeers(t, "kyverno-leftover-webhook.orphans", peers.Target{Command: "orphans", Namespace: ns}, []string{"orphans", "-n", ns}, code, out+stderr)
	if code != cmdutil.ExitFinding {
		t.Errorf("orphans: exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	doctortest.Golden(t, "kyverno-leftover-webhook.orphans.golden", section(out, "fail-closed webhook without a server"))
	doctortest.RunAdvice(t, env.Kubeconfig, section(out, "fail-closed webhook without a server"), nil)
}

// section is the group of an orphans report whose title starts with title.
func section(out, title string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(out, "\n") {
		switch {
		case strings.HasPrefix(line, title):
			in = true
		case in && strings.TrimSpace(line) == "":
			return b.String()
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// https://github.com/kubernetes/kubernetes/issues/61214,
// https://github.com/opendevstack/ods-pipeline/issues/647: a claim stays
// Terminating under kubernetes.io/pvc-protection while a pod uses it, here
// a pod on a node that died. why names the pod and its node, and never
// advises removing pvc-protection (the volume would go under the pod).
func TestCorpusPVCInUseOnDeadNode(t *testing.T) {
	const ns = "corpus-pvc"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.ClearFinalizers(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, ns, "data")
	})
	env.DeadNode(t, "corpus-worker-2", time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	env.BoundPod(t, ns, "db-0", "corpus-worker-2", "data")
	if err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, ns, "data")
	out := whyCase(t, "pvc-in-use-on-dead-node.golden", "pvc/data", "-n", ns)
	for _, want := range []string{"db-0 on node corpus-worker-2", "do not remove it"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// https://github.com/kubernetes/kubernetes/issues/66125,
// https://github.com/kubernetes/kubernetes/issues/80309: the node's
// kubelet is gone (NotReady), and its pods stay Terminating: only a
// kubelet confirms that containers stopped.
func TestCorpusPodOnNotReadyNode(t *testing.T) {
	const ns = "corpus-dead-node"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	env.DeadNode(t, "corpus-worker-1", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	env.BoundPod(t, ns, "kubernetes-dashboard-db4db8c77-4qqvm", "corpus-worker-1")
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, "kubernetes-dashboard-db4db8c77-4qqvm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, "kubernetes-dashboard-db4db8c77-4qqvm")
	out := whyCase(t, "pod-on-notready-node.golden", "pod/kubernetes-dashboard-db4db8c77-4qqvm", "-n", ns)
	// The safe procedure, in its order: confirm, taint, force only then.
	confirm, taint, force := strings.Index(out, "confirm that node"), strings.Index(out, "out-of-service"), strings.Index(out, "--force")
	if confirm < 0 || taint < confirm || force < taint {
		t.Errorf("the procedure is not confirm, then taint, then force delete:\n%s", out)
	}
}

// https://github.com/argoproj/argo-cd/issues/8813: the node was deleted
// and its pod still shows Terminating; the pod garbage collector does not
// run to remove it.
func TestCorpusPodOnMissingNode(t *testing.T) {
	const ns = "corpus-missing-node"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	env.BoundPod(t, ns, "runner-7x2kq", "corpus-deleted-node")
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, "runner-7x2kq", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, "runner-7x2kq")
	whyCase(t, "pod-on-missing-node.golden", "pod/runner-7x2kq", "-n", ns)
	// The namespace waits on the same pod, named the same way.
	env.DeleteNamespace(t, ns, "NamespaceDeletionContentFailure")
	whyCase(t, "pod-on-missing-node.namespace.golden", "namespace/"+ns)
}

// https://github.com/kubernetes/kubernetes/issues/77086: a namespace
// applied with spec.finalizers [foregroundDeletion] can never be deleted:
// nothing removes that entry from a namespace's spec.finalizers. Before
// this, why said "nothing found that holds it" with exit code 0.
func TestCorpusNamespaceSpecFinalizer(t *testing.T) {
	const ns = "corpus-delete-me"
	ctx := t.Context()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"foregroundDeletion"}}}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	env.DeleteNamespace(t, ns, "")
	namespaceState(t, ns, "only foregroundDeletion left", func(n *corev1.Namespace) bool {
		return slices.Equal(n.Spec.Finalizers, []corev1.FinalizerName{"foregroundDeletion"})
	})
	whyCase(t, "namespace-spec-finalizer.golden", "namespace/"+ns)

	// What why advises (the finalize subresource without the entry) lets it go.
	n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Finalizers = nil
	if _, err := env.Kube.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	doctortest.WaitGone(t, "namespace "+ns, func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
}

// https://github.com/MicrosoftDocs/azure-docs/issues/49604,
// https://github.com/FairwindsOps/rbac-manager/issues/144: a chart's
// namespace was deleted instead of helm uninstall; its ClusterRole stays
// and blocks the next install. orphans names it.
func TestCorpusHelmLeftoverClusterRole(t *testing.T) {
	ctx := t.Context()
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "corpus-nginx-ingress", "labels": map[string]any{"app.kubernetes.io/managed-by": "Helm"},
			"annotations": map[string]any{"meta.helm.sh/release-name": "nginx-ingress", "meta.helm.sh/release-namespace": "corpus-ingress-basic"}},
	}}
	clusterroles := env.Dynamic.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"})
	if _, err := clusterroles.Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusterroles.Delete(context.Background(), "corpus-nginx-ingress", metav1.DeleteOptions{}) })
	code, out, stderr := env.Run(t, "orphans")
	recordPeers(t, "helm-leftover-clusterrole.orphans", peers.Target{Command: "orphans"}, []string{"orphans"}, code, out+stderr)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	var lines []string
	for _, l := range strings.SplitAfter(section(out, "Helm release gone"), "\n") {
		if strings.Contains(l, "corpus-nginx-ingress") || strings.Contains(l, "corpus-ingress-basic") {
			lines = append(lines, l)
		}
	}
	doctortest.Golden(t, "helm-leftover-clusterrole.orphans.golden", strings.Join(lines, ""))
}

// https://github.com/kubernetes/kubernetes/issues/93392: deleting
// cert-manager's challenges CRD hangs: a Challenge keeps cert-manager's
// finalizer.acme.cert-manager.io after cert-manager is gone, so the CRD
// waits on customresourcecleanup.
func TestCorpusCertManagerCRDStuckOnChallenge(t *testing.T) {
	const ns = "corpus-challenges"
	ctx := t.Context()
	crd := doctortest.CRD("acme.cert-manager.io", "Challenge", "challenges", true, "v1")
	gvr := env.EnsureCRDOf(t, crd)
	env.CreateNamespace(t, ns, nil)
	env.CreateHeld(t, gvr, "Challenge", ns, "www-example-com-2", "cert-manager-challenges", false, "finalizer.acme.cert-manager.io")
	if err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, gvr, ns, "www-example-com-2")
	whyCase(t, "cert-manager-crd-stuck.golden", "customresourcedefinition/"+crd.Name)
}

// https://github.com/kubernetes/website/pull/43773,
// https://github.com/kubernetes/kubernetes/issues/127917: a Job's pod
// stays Terminating with batch.kubernetes.io/job-tracking because a
// fail-closed webhook on pod UPDATEs refuses the job controller's removal
// of the finalizer. The cause is the webhook, and the finalizer is never
// to be removed by hand.
func TestCorpusJobTrackingPodBehindWebhook(t *testing.T) {
	const ns = "corpus-job-tracking"
	ctx := t.Context()
	env.CreateNamespace(t, ns, map[string]string{"corpus": ns})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backup-28194180-hgdzc", Finalizers: []string{"batch.kubernetes.io/job-tracking"}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{Name: "backup", Image: "backup"}}}}
	doctortest.WaitFor(t, "creating pod "+pod.Name, func(ctx context.Context) bool {
		_, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
		return err == nil
	})
	t.Cleanup(func() {
		env.ClearFinalizers(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, pod.Name)
	})
	failClosedWebhook(t, "kyverno-resource-validating-webhook-cfg", "validate.kyverno.svc-fail", "kyverno", "kyverno-svc", ns,
		[]admissionv1.OperationType{admissionv1.Update}, "pods")
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, pod.Name)
	out := whyCase(t, "job-tracking-pod-behind-webhook.golden", "pod/"+pod.Name, "-n", ns)
	if !strings.Contains(out, "UPDATE pods (finalizer removal)") {
		t.Error("the webhook refusing the finalizer's removal is not named")
	}
}

// https://github.com/kubernetes/kubernetes/issues/19317: OpenShift, run
// under Kubernetes and then removed, left openshift.io/origin in its
// namespaces' spec.finalizers: empty namespaces that never go.
func TestCorpusOpenShiftSpecFinalizer(t *testing.T) {
	const ns = "corpus-openshift-infra"
	ctx := t.Context()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"openshift.io/origin"}}}, metav1.CreateOptions{FieldManager: "openshift-controller-manager"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n, err := env.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err == nil {
			n.Spec.Finalizers = nil
			_, _ = env.Kube.CoreV1().Namespaces().Finalize(context.Background(), n, metav1.UpdateOptions{})
		}
	})
	env.DeleteNamespace(t, ns, "")
	namespaceState(t, ns, "only openshift.io/origin left", func(n *corev1.Namespace) bool {
		return slices.Equal(n.Spec.Finalizers, []corev1.FinalizerName{"openshift.io/origin"})
	})
	whyCase(t, "openshift-spec-finalizer.golden", "namespace/"+ns)
}

// https://github.com/kubernetes/kubernetes/issues/64002,
// https://github.com/kubernetes/kubernetes/issues/73186: rook-ceph is
// deleted with the Rook operator; the CephCluster keeps its finalizer.
func TestCorpusRookCephNamespace(t *testing.T) {
	namespaceHeldByOperator(t, "corpus-rook-ceph", doctortest.CRD("ceph.rook.io", "CephCluster", "cephclusters", true, "v1"),
		"rook", "cephcluster.ceph.rook.io", "rook-ceph-namespace.golden", "rook-ceph")
}

// https://github.com/kubeflow/kfctl/issues/404: kfctl delete leaves
// Kubeflow's mutating webhooks behind, and new pods can no longer be
// created. orphans flags the configuration as refusing requests now.
func TestCorpusKubeflowLeftoverMutatingWebhook(t *testing.T) {
	const ns = "corpus-kubeflow"
	ctx := t.Context()
	env.CreateNamespace(t, ns, map[string]string{"corpus": ns})
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	mwc := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "inferenceservice.serving.kubeflow.org"},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    "inferenceservice.kfserving-webhook-server.pod-mutator",
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "kubeflow", Name: "kfserving-webhook-server-service", Path: new("/mutate-pods")}},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"corpus": ns}},
		}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})
	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{}); err == nil {
		t.Fatal("the leftover webhook did not refuse a new pod")
	}
	code, out, stderr := env.Run(t, "orphans", "-n", ns)
	recordPeers(t, "kubeflow-leftover-mutating-webhook.orphans", peers.Target{Command: "orphans", Namespace: ns}, []string{"orphans", "-n", ns}, code, out+stderr)
	if code != cmdutil.ExitFinding {
		t.Errorf("orphans: exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	doctortest.Golden(t, "kubeflow-leftover-mutating-webhook.orphans.golden", section(out, "fail-closed webhook without a server"))
	doctortest.RunAdvice(t, env.Kubeconfig, section(out, "fail-closed webhook without a server"), nil)
}

// hostPathVolume creates a PersistentVolume claimed by ns/claim, with
// extra finalizers written by manager; the test's cleanup removes them and
// deletes it.
func hostPathVolume(t *testing.T, name, ns, claim, manager string, finalizers ...string) {
	t.Helper()
	ctx := t.Context()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/k8s-pv/" + name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
		}}
	if _, err := env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvs := schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	t.Cleanup(func() {
		env.ClearFinalizers(pvs, "", name)
		_ = env.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if len(finalizers) > 0 {
		cur, err := env.Kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Finalizers = append(cur.Finalizers, finalizers...)
		if _, err := env.Kube.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Kube.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletingObject(t, pvs, "", name)
}

// https://github.com/kubernetes/kubernetes/issues/78106: a PV claimed by
// a StatefulSet's claim stays Terminating under kubernetes.io/pv-protection
// while the claim exists. why names the claim, and never advises removing
// pv-protection.
func TestCorpusVolumeBoundToClaim(t *testing.T) {
	const ns = "corpus-es"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-elasticsearch-data-0"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "corpus-elasticsearch-data-001",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.ClearFinalizers(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, ns, claim.Name)
	})
	hostPathVolume(t, "corpus-elasticsearch-data-001", ns, claim.Name, "")
	whyCase(t, "volume-bound-to-claim.golden", "pv/corpus-elasticsearch-data-001")
}

// https://github.com/kubernetes/kubernetes/issues/77258: a PV keeps
// external-attacher/io-rancher-longhorn after its CSI driver is gone; the
// claim and the pod are gone already.
func TestCorpusVolumeHeldByGoneAttacher(t *testing.T) {
	hostPathVolume(t, "corpus-pvc-3252ac79", "corpus-sentry", "sentry-data", "csi-attacher", "external-attacher/io-rancher-longhorn")
	whyCase(t, "volume-held-by-gone-attacher.golden", "pv/corpus-pvc-3252ac79")
}
