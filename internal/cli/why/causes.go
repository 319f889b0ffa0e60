package why

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// The causes Kubernetes' own finalizers and the namespace controller wait
// for, followed down the chain: a Pod on a dead node, the Pods that use a
// claim, a definition's custom resources, a conversion webhook or an
// aggregated API that cannot answer, and a namespace's spec.finalizers.

// outOfService is the taint that tells Kubernetes a node is shut down for
// good (non-graceful node shutdown).
const outOfService = "node.kubernetes.io/out-of-service"

// nodeFacts says whether the node called name is dead (missing, or its
// kubelet no longer reports Ready), and the facts that show it.
func nodeFacts(f *Facts, name string) (dead bool, facts []Fact) {
	n, ok := f.Nodes[name]
	if !ok {
		return true, []Fact{{"node", name + " does not exist (deleted, or never registered): no kubelet will confirm the pod stopped"}}
	}
	facts = []Fact{{"node", name}}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return false, nil
		}
		facts = append(facts, Fact{"ready", fmt.Sprintf("%s since %s (%s: %s)", c.Status, stamp(c.LastTransitionTime.Time), orDefault(c.Reason, "no reason"), orDefault(c.Message, "no message"))})
		facts = append(facts, Fact{"last heartbeat", stamp(c.LastHeartbeatTime.Time) + " (the kubelet's last status report)"})
		dead = true
	}
	if !dead && len(facts) == 1 {
		facts = append(facts, Fact{"ready", "no Ready condition: its kubelet never reported"})
		dead = true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == outOfService {
			facts = append(facts, Fact{"taint", fmt.Sprintf("%s=%s:%s is set", t.Key, t.Value, t.Effect)})
		}
	}
	return dead, facts
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// deadNodeFindings explain the pods (those pick selects) on nodes whose
// kubelet is gone: only a kubelet confirms that a pod's containers stopped.
func deadNodeFindings(f *Facts, pick func(*corev1.Pod) bool) []Finding {
	byNode := map[string][]string{}
	for i := range f.Pods {
		p := &f.Pods[i]
		if p.Spec.NodeName == "" || !pick(p) {
			continue
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
	}
	var out []Finding
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		dead, facts := nodeFacts(f, node)
		if !dead {
			continue
		}
		pods := byNode[node]
		sort.Strings(pods)
		ns := f.Pods[0].Namespace
		_, exists := f.Nodes[node]
		state := "is not Ready"
		if !exists {
			state = "does not exist"
		}
		fd := Finding{Kind: "Node", Blocking: true,
			Title: fmt.Sprintf("%s on node %s, which %s: no kubelet will confirm that %s containers stopped", cmdutil.Plural(len(pods), "pod is", "pods are"), node, state, map[bool]string{true: "its", false: "their"}[len(pods) == 1]),
			Facts: append([]Fact{{"pods", names(pods)}}, facts...),
		}
		force := fmt.Sprintf("kubectl delete pod %s -n %s --grace-period=0 --force", strings.Join(pods, " "), ns)
		risk := "the pods go from the API at once; if the node is in fact alive, their containers keep running beside the replacements (a StatefulSet's second copy with the same identity, two writers on a ReadWriteOnce volume)"
		if exists {
			fd.Advice = []string{
				fmt.Sprintf("confirm that node %s is really down and will not come back (its machine is off or gone: kubectl get node %s -o wide, the cloud console); a node that is only cut off still runs the containers", node, node),
				fmt.Sprintf("then mark it out of service: kubectl taint node %s %s=nodeshutdown:NoExecute; kube-controller-manager then force-deletes its pods and detaches their volumes (non-graceful node shutdown); remove the taint once the node is back or deleted", node, outOfService),
				"only if a pod still stays after that: " + force + "; " + risk,
			}
		} else {
			fd.Advice = []string{
				fmt.Sprintf("kube-controller-manager's pod garbage collector deletes pods bound to a node that no longer exists; that it has not means it does not run, or node %s is about to be re-created (check: kubectl get node %s)", node, node),
				"once you are sure the machine that was " + node + " runs nothing any more: " + force + "; " + risk,
			}
		}
		out = append(out, fd)
	}
	return out
}

// claimFindings explain a PersistentVolumeClaim kept by pvc-protection: the
// pods that use it, and their nodes.
func claimFindings(f *Facts, deleting bool) []Finding {
	claim := f.Object.GetName()
	if !slices.Contains(f.Object.GetFinalizers(), "kubernetes.io/pvc-protection") {
		return nil
	}
	var users, pods []string
	var onDead []string
	for _, p := range f.Pods {
		if !usesClaim(&p, claim) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pods = append(pods, p.Name)
		u := p.Name
		if p.Spec.NodeName == "" {
			u += " (not scheduled)"
		} else {
			u += " on node " + p.Spec.NodeName
			if dead, _ := nodeFacts(f, p.Spec.NodeName); dead {
				u += " (dead: see its own finding)"
				onDead = append(onDead, p.Name)
			}
		}
		if p.DeletionTimestamp != nil {
			u += ", Terminating"
		}
		users = append(users, u)
	}
	if len(users) == 0 {
		return nil
	}
	// Users on dead nodes are held by the node: that finding is the cause.
	fd := Finding{Kind: "Claim", Blocking: deleting && len(onDead) < len(users),
		Title: fmt.Sprintf("the claim is in use by %s: pvc-protection keeps it until none uses it", cmdutil.Plural(len(users), "pod", "pods")),
		Facts: []Fact{{"used by", names(users)}},
		Advice: []string{
			fmt.Sprintf("delete the pods that use it, or scale down the workload that owns them (kubectl get pod %s -n %s -o custom-columns=POD:.metadata.name,OWNER-KIND:.metadata.ownerReferences[*].kind,OWNER:.metadata.ownerReferences[*].name shows their owners); the claim then goes by itself",
				strings.Join(pods, " "), f.Object.GetNamespace()),
		},
	}
	if !deleting {
		fd.Title = fmt.Sprintf("the claim is in use by %s: a deletion would wait until none uses it", cmdutil.Plural(len(users), "pod", "pods"))
	}
	out := []Finding{fd}
	if len(onDead) > 0 {
		out = append(out, deadNodeFindings(f, func(p *corev1.Pod) bool { return slices.Contains(onDead, p.Name) })...)
	}
	return out
}

// volumeFindings explain a PersistentVolume kept by pv-protection: the
// claim bound to it goes first.
func volumeFindings(f *Facts, deleting bool) []Finding {
	if !slices.Contains(f.Object.GetFinalizers(), "kubernetes.io/pv-protection") || f.Claim == nil {
		return nil
	}
	c := f.Claim
	state := string(c.Status.Phase)
	if c.DeletionTimestamp != nil {
		state = "Terminating"
	}
	fd := Finding{Kind: "Claim", Blocking: deleting,
		Title:  fmt.Sprintf("the volume is bound to claim %s/%s, which exists: pv-protection keeps the volume until the claim is gone", c.Namespace, c.Name),
		Facts:  []Fact{{"claim", fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, orDefault(state, "no phase"))}},
		Advice: []string{fmt.Sprintf("delete the claim first (kubectl delete pvc %s -n %s), or, if it is stuck, teardown why pvc/%s -n %s; the volume then goes by itself, as its reclaim policy says", c.Name, c.Namespace, c.Name, c.Namespace)},
	}
	if !deleting {
		fd.Title = fmt.Sprintf("the volume is bound to claim %s/%s: a deletion would wait until the claim is gone", c.Namespace, c.Name)
	}
	return []Finding{fd}
}

func usesClaim(p *corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
		if v.Ephemeral != nil && p.Name+"-"+v.Name == claim {
			return true
		}
	}
	return false
}

// definitionFindings explain a CustomResourceDefinition kept by
// customresourcecleanup: its custom resources, and what holds each.
func definitionFindings(f *Facts, deleting bool, rel related) []Finding {
	if !deleting || !slices.Contains(f.Object.GetFinalizers(), "customresourcecleanup.apiextensions.k8s.io") || len(f.Instances) == 0 {
		return nil
	}
	out := contentFindings(f, f.Instances, deleting, rel, "of the definition", []string{"these custom resources stay in storage and come back if the definition is created again"})
	if len(out) > 0 && out[0].Kind == "Content" {
		out[0].Advice = []string{"kube-apiserver deletes them once what holds each (its own finding) is dealt with; the definition goes after them"}
	}
	return out
}

// conversionFindings explain the resources that could not be listed
// because their CRD's conversion webhook fails; it returns the keys of
// f.ListFailures it explained.
func conversionFindings(f *Facts, deletingNS string) ([]Finding, map[string]bool) {
	explained := map[string]bool{}
	byCRD := map[string][]string{}
	crds := map[string]doctor.CRD{}
	for key, msg := range f.ListFailures {
		crd, ok := doctor.CRDOfResource(f.CRDs, key)
		if !ok || crd.Webhook == "" || !strings.Contains(msg, "conversion webhook") {
			continue
		}
		explained[key] = true
		crds[crd.Name] = crd
		byCRD[crd.Name] = append(byCRD[crd.Name], msg)
	}
	var out []Finding
	for _, n := range slices.Sorted(maps.Keys(byCRD)) {
		crd := crds[n]
		msgs := byCRD[n]
		sort.Strings(msgs)
		fd := Finding{Kind: "Conversion", Blocking: deletingNS != "",
			Title: fmt.Sprintf("%s cannot be listed: the conversion webhook of customresourcedefinition %s fails", crd.Resource(), crd.Name),
			Facts: []Fact{{"webhook", crd.Webhook}, {"error", msgs[0]}},
		}
		if deletingNS != "" {
			fd.Facts = append(fd.Facts, Fact{"effect", fmt.Sprintf("the namespace controller cannot list or delete %s in any namespace being deleted, so it cannot tell whether any remain; neither can this diagnosis", crd.Resource())})
		}
		none := fmt.Sprintf(`kubectl patch customresourcedefinition %s --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}'`, crd.Name)
		noneWhy := "kube-apiserver then serves the stored objects at every version without converting them (fields of other versions are not translated), so they can be listed and deleted; put the webhook back with its server"
		if crd.WebhookNamespace != "" && crd.WebhookNamespace == deletingNS {
			fd.Facts = append(fd.Facts, Fact{"server", fmt.Sprintf("ran in namespace %s, which is being deleted: it cannot come back there (a Terminating namespace refuses new objects)", deletingNS)})
			fd.Advice = []string{
				"run the conversion server outside this namespace and point the definition at it (spec.conversion.webhook.clientConfig), or, if its objects may be read unconverted: " + none + "; " + noneWhy,
			}
		} else {
			fd.Advice = []string{
				"bring back the conversion webhook's server (" + crd.Webhook + ")",
				"or, if it is gone for good and the objects may be read unconverted: " + none + "; " + noneWhy,
			}
		}
		out = append(out, fd)
	}
	return out, explained
}

// specFinalizerFindings explain a namespace's spec.finalizers: "kubernetes"
// (the namespace controller's, removed once the namespace is empty) and any
// other, which only its own controller removes.
func specFinalizerFindings(f *Facts, deleting, empty bool) []Finding {
	spec, _, _ := unstructured.NestedStringSlice(f.Object.Object, "spec", "finalizers")
	setters := doctor.FinalizerManagers(f.Object.GetManagedFields())
	ns := f.Object.GetName()
	var out []Finding
	for _, fin := range spec {
		v := f.Controllers.Explain(fin, setters[fin])
		if fin == "kubernetes" {
			if !deleting || !empty {
				continue // the content and causes above are what it waits for
			}
			out = append(out, Finding{Kind: "Finalizer", Blocking: true,
				Title:  "the namespace is empty but its finalizer kubernetes remains",
				Facts:  []Fact{{"removed by", v.Remover}, {"running", fmt.Sprintf("%s: %s", v.State, v.Evidence)}},
				Advice: []string{"do not remove it: check that kube-controller-manager runs with the namespace controller (its log names what it still waits for)"},
			})
			continue
		}
		fd := Finding{Kind: "Finalizer", Blocking: deleting || v.Unremoved(),
			Title: fmt.Sprintf("spec.finalizers entry %s: the namespace controller never removes it; %s", fin, v.Says()),
			Facts: []Fact{{"on", "namespace/" + ns + " (spec.finalizers, not metadata.finalizers)"}, {"set by", setters[fin].Describe()}, {"removed by", v.Remover}, {"running", fmt.Sprintf("%s: %s", v.State, v.Evidence)}},
		}
		if v.Source != "" {
			fd.Facts = append(fd.Facts, Fact{"documented", v.Source})
		}
		finalize := fmt.Sprintf("kubectl get namespace %s -o json | jq '.spec.finalizers -= [%q]' | kubectl replace --raw /api/v1/namespaces/%s/finalize -f -", ns, fin, ns)
		if v.Kubernetes {
			// Kubernetes' controllers act on this name in metadata.finalizers
			// only; in a namespace's spec.finalizers nothing removes it.
			fd.Title = fmt.Sprintf("spec.finalizers entry %s: nobody removes it there (Kubernetes handles only \"kubernetes\" in a namespace's spec.finalizers)", fin)
			fd.Blocking = true
			fd.Facts = []Fact{{"on", "namespace/" + ns + " (spec.finalizers, not metadata.finalizers)"}, {"set by", setters[fin].Describe()},
				{"removed by", fmt.Sprintf("nobody: %s means something to %s in metadata.finalizers, not in a namespace's spec.finalizers", fin, v.Remover)}}
			fd.Advice = []string{"it guards nothing there, so removing it skips nothing: " + finalize}
			out = append(out, fd)
			continue
		}
		obj := finalizedObject{ref: "namespace/" + ns, kindArg: "namespace", name: ns}
		fd.Advice = finalizerAdvice(v, []finalizedObject{obj}, related{}, nil)
		if v.State == doctor.Gone {
			// spec.finalizers change only through the finalize subresource.
			fd.Advice[1] = fmt.Sprintf("only if %s is uninstalled for good (%s): %s; this skips %s's cleanup of the namespace", v.Remover, v.Evidence, finalize, v.Remover)
		}
		out = append(out, fd)
	}
	return out
}

// serverInDeletedNamespace: a server (an APIService's or a webhook's
// service, "namespace/name") lived in the namespace being deleted.
func serverInDeletedNamespace(service, deletingNS string) bool {
	ns, _, ok := strings.Cut(service, "/")
	return ok && deletingNS != "" && ns == deletingNS
}

// podDeleting picks the pods being deleted.
func podDeleting(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// heldBy says which other finding explains why o, which has no finalizer
// or lien, is still there: a webhook refusing its DELETE, or a dead node.
func heldBy(f *Facts, o *resource.Object) string {
	for _, w := range f.Webhooks {
		if w.Down() && w.Matches(doctor.Request{GVR: o.Resource.GVR, Namespaced: o.Namespace != "", Operation: admissionv1.Delete, NamespaceLabels: f.NamespaceLabels, ObjectLabels: o.Labels}) {
			return "DELETE refused by webhook " + w.Name
		}
	}
	isPod := func(o *resource.Object) bool { return o.Resource.GVR.Group == "" && o.Resource.Kind == "Pod" }
	if isPod(o) {
		for i := range f.Pods {
			if p := &f.Pods[i]; p.Name == o.Name && p.Spec.NodeName != "" {
				if dead, _ := nodeFacts(f, p.Spec.NodeName); dead {
					return "on dead node " + p.Spec.NodeName
				}
			}
		}
		return ""
	}
	if f.targetIsNamespace() && f.Object.GetDeletionTimestamp() != nil && slices.ContainsFunc(f.Content, isPod) {
		return "waits for the pods: the namespace controller deletes them first"
	}
	return ""
}
