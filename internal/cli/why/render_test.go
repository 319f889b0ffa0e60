package why

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// namespaceInfo is a namespace as resource.Get resolves it.
func namespaceInfo(name string) *cliresource.Info {
	return &cliresource.Info{Mapping: &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Scope: meta.RESTScopeRoot}, Name: name}
}

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

var widgets = resource.APIResource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}

func finalizerFields(manager, finalizer string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{".":{},"v:\"` + finalizer + `\"":{}}}}`)}}
}

func stuckNamespace() *Facts {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "foohome", "uid": "ns-uid", "deletionTimestamp": "2026-05-01T11:58:00Z"},
		"spec":     map[string]any{"finalizers": []any{"kubernetes"}},
		"status": map[string]any{"phase": "Terminating", "conditions": []any{
			map[string]any{"type": "NamespaceDeletionDiscoveryFailure", "status": "True", "reason": "DiscoveryFailed", "message": "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.example.com/v1beta1: stale GroupVersion discovery: metrics.example.com/v1beta1"},
			map[string]any{"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted"},
			map[string]any{"type": "NamespaceFinalizersRemaining", "status": "True", "reason": "SomeFinalizersRemain", "message": "Some content in the namespace has finalizers remaining: example.com/cleanup in 3 resource instances"},
		}},
	}}
	var content []*resource.Object
	for _, n := range []string{"c", "a", "b"} {
		content = append(content, &resource.Object{Resource: widgets, ObjectMeta: metav1.ObjectMeta{
			Name: n, Namespace: "foohome", UID: k8stypes.UID("w-" + n), Finalizers: []string{"example.com/cleanup"},
			DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)},
			ManagedFields:     finalizerFields("widget-operator", "example.com/cleanup"),
		}})
	}
	content = append(content, &resource.Object{
		Resource: resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret", Namespaced: true},
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.myfoo.v1", Namespace: "foohome", UID: "s1",
			Labels:      map[string]string{lien.Label: "true"},
			Annotations: map[string]string{lien.Annotation: `[{"lien":"foohome/keep-release","reason":"release record needed to uninstall myfoo cleanly"}]`}},
	})
	role := &resource.Object{
		Resource: resource.APIResource{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "foohome-myfoo-foo", UID: "r1",
			Annotations: map[string]string{doctor.HelmReleaseName: "myfoo", doctor.HelmReleaseNS: "foohome"}},
	}
	return &Facts{
		Target:  namespaceInfo("foohome"),
		Object:  ns,
		Content: content,
		Related: []*resource.Object{role},
		Controllers: &doctor.Controllers{
			Workloads: []doctor.Workload{{Kind: "deployment", Namespace: "foo-system", Name: "widget-operator", Programs: []string{"manager"}, Ready: 0, Desired: 1}},
		},
		APIServices:       []doctor.APIService{{Name: "v1beta1.metrics.example.com", Service: "monitoring/metrics", Reason: "ServiceNotFound", Message: `service/metrics in "monitoring" is not present`}},
		DiscoveryFailures: map[string]string{},
		ListFailures:      map[string]string{},
		LienObjects:       map[string]doctor.LienObject{"foohome/keep-release": {Reason: "release record needed to uninstall myfoo cleanly", HeldBy: []string{"foohome/Foo/myfoo"}}},
		Now:               now,
	}
}

func TestRenderStuckNamespace(t *testing.T) {
	d := Diagnose(stuckNamespace())
	var text, js bytes.Buffer
	if err := Render(&text, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "stuck-namespace.golden", text.Bytes())
	if err := RenderJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "stuck-namespace.json.golden", js.Bytes())
}

func TestRenderNothingHolds(t *testing.T) {
	f := &Facts{
		Target:      &cliresource.Info{Mapping: &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Scope: meta.RESTScopeNamespace}, Namespace: "default", Name: "settings"},
		Object:      &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "default"}}},
		Controllers: &doctor.Controllers{},
	}
	var text bytes.Buffer
	if err := Render(&text, Diagnose(f)); err != nil {
		t.Fatal(err)
	}
	golden(t, "nothing-holds.golden", text.Bytes())
}

// TestRenderLienCycle: two liens that each hold what the other protects
// keep a namespace Terminating for ever; why names the cycle.
func TestRenderLienCycle(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "cyc", "uid": "ns-uid", "deletionTimestamp": "2026-05-01T11:58:00Z"},
		"status":   map[string]any{"phase": "Terminating"},
	}}
	marked := func(r resource.APIResource, name, lienName string, lbls map[string]string) *resource.Object {
		l := map[string]string{lien.Label: "true"}
		for k, v := range lbls {
			l[k] = v
		}
		return &resource.Object{Resource: r, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cyc", UID: k8stypes.UID(name), Labels: l,
			Annotations: map[string]string{lien.Annotation: `[{"lien":"` + lienName + `","reason":"kept"}]`}}}
	}
	configMaps := resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	secrets := resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret", Namespaced: true}
	selector, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &Facts{
		Target: namespaceInfo("cyc"),
		Object: ns,
		Content: []*resource.Object{
			marked(configMaps, "c", "cyc/keep-c", map[string]string{"app": "c"}),
			marked(secrets, "s", "cyc/keep-s", nil),
			{Resource: configMaps, ObjectMeta: metav1.ObjectMeta{Name: "free", Namespace: "cyc", UID: "free"}},
		},
		Controllers:       &doctor.Controllers{},
		DiscoveryFailures: map[string]string{},
		ListFailures:      map[string]string{},
		LienObjects: map[string]doctor.LienObject{
			"cyc/keep-c": {Reason: "kept", HeldBy: []string{"Secret/s"}, Holders: []doctor.Holder{{GroupKind: schema.GroupKind{Kind: "Secret"}, Namespace: "cyc", Name: "s"}}},
			"cyc/keep-s": {Reason: "kept", HeldBy: []string{"ConfigMap/(selector)"}, Holders: []doctor.Holder{{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Namespace: "cyc", Selector: selector}}},
		},
		Now: now,
	}
	var text bytes.Buffer
	if err := Render(&text, Diagnose(f)); err != nil {
		t.Fatal(err)
	}
	golden(t, "lien-cycle.golden", text.Bytes())
}

// TestRenderFinalizerAdvice: each kind of remover gets its own advice, and
// only a remover confirmed gone comes with the command that removes the
// finalizer. Kubernetes' own finalizers are never to be removed, and a
// finalizer written from a manifest is not "added by hand, nobody removes it".
func TestRenderFinalizerAdvice(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "mixed", "uid": "ns-uid", "deletionTimestamp": "2026-05-01T11:58:00Z"},
		"spec":     map[string]any{"finalizers": []any{"kubernetes"}},
		"status":   map[string]any{"phase": "Terminating"},
	}}
	applied := func(manager, finalizer string) []metav1.ManagedFieldsEntry {
		e := finalizerFields(manager, finalizer)
		e[0].Operation = metav1.ManagedFieldsOperationApply
		return e
	}
	obj := func(r resource.APIResource, name string, fields []metav1.ManagedFieldsEntry, finalizers ...string) *resource.Object {
		return &resource.Object{Resource: r, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mixed", UID: k8stypes.UID(name),
			Finalizers: finalizers, DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, ManagedFields: fields}}
	}
	apps := resource.APIResource{GVR: schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}, Kind: "Application", Namespaced: true}
	pvcs := resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, Kind: "PersistentVolumeClaim", Namespaced: true}
	f := &Facts{
		Target: namespaceInfo("mixed"),
		Object: ns,
		Content: []*resource.Object{
			// Gone: the controller that added it is nowhere.
			obj(widgets, "gone", finalizerFields("widget-operator", "example.com/cleanup"), "example.com/cleanup"),
			// Applied by Argo CD, honoured by its application controller, which runs.
			obj(apps, "guestbook", applied("argocd-controller", "resources-finalizer.argocd.argoproj.io"), "resources-finalizer.argocd.argoproj.io"),
			// Written with kubectl, nothing of its domain found: unknown, not "nobody".
			obj(widgets, "by-hand", finalizerFields("kubectl-edit", "example.org/hold"), "example.org/hold"),
			// Kubernetes' own.
			obj(pvcs, "data", nil, "kubernetes.io/pvc-protection"),
		},
		Controllers: &doctor.Controllers{
			Workloads: []doctor.Workload{{Kind: "statefulset", Namespace: "argocd", Name: "argocd-application-controller", Programs: []string{"argocd-application-controller"}, Ready: 1, Desired: 1}},
		},
		DiscoveryFailures: map[string]string{},
		ListFailures:      map[string]string{},
		Now:               now,
	}
	var text bytes.Buffer
	if err := Render(&text, Diagnose(f)); err != nil {
		t.Fatal(err)
	}
	golden(t, "finalizer-advice.golden", text.Bytes())
	for _, unsafe := range []string{"nobody: it was added by hand", "finalizers/0\"}]' (for each object)", "remove\",\"path\":\"/metadata/finalizers/0\"}]' -n mixed"} {
		if strings.Contains(text.String(), unsafe) {
			t.Errorf("output contains %q", unsafe)
		}
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if strings.Contains(line, "kubectl patch") && !strings.Contains(line, "widget.example.com gone") {
			t.Errorf("a removal command for a finalizer whose remover is not confirmed gone: %s", line)
		}
	}
}

// TestRenderNamespaceCauses: every holder a namespace can have besides
// finalizers, each one finding with its consequences under it: a kind
// whose conversion webhook lived in the namespace (not "empty"), an
// APIService with its failing discovery, a pod on a dead node, and an
// entry of spec.finalizers nothing removes.
func TestRenderNamespaceCauses(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "ops", "uid": "ns-uid", "deletionTimestamp": "2026-05-01T11:58:00Z"},
		"spec":     map[string]any{"finalizers": []any{"kubernetes", "foregroundDeletion"}},
		"status":   map[string]any{"phase": "Terminating"},
	}}
	pods := resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true}
	configMaps := resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	deleted := &metav1.Time{Time: now.Add(-time.Minute)}
	heartbeat := metav1.NewTime(now.Add(-time.Hour))
	f := &Facts{
		Target: namespaceInfo("ops"),
		Object: ns,
		Content: []*resource.Object{
			{Resource: pods, ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ops", UID: "p1", DeletionTimestamp: deleted}},
			{Resource: configMaps, ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "ops", UID: "c1"}},
		},
		Pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ops", DeletionTimestamp: deleted}, Spec: corev1.PodSpec{NodeName: "worker-1"}}},
		Nodes: map[string]*corev1.Node{"worker-1": {ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastHeartbeatTime: heartbeat, LastTransitionTime: heartbeat},
		}}}},
		CRDs: []doctor.CRD{{Name: "challenges.acme.cert-manager.io", Group: "acme.cert-manager.io", Kind: "Challenge", Plural: "challenges", Namespaced: true,
			Versions: []string{"v1alpha2", "v1"}, Storage: "v1", Webhook: "service ops/cert-manager-webhook", WebhookNamespace: "ops"}},
		Controllers:       &doctor.Controllers{},
		APIServices:       []doctor.APIService{{Name: "v1beta1.metrics.k8s.io", Service: "kube-system/metrics-server", Reason: "ServiceNotFound", Message: `service/metrics-server in "kube-system" is not present`}},
		DiscoveryFailures: map[string]string{"metrics.k8s.io/v1beta1": "stale GroupVersion discovery: metrics.k8s.io/v1beta1"},
		ListFailures: map[string]string{
			"metrics.k8s.io/v1beta1":                       "stale GroupVersion discovery: metrics.k8s.io/v1beta1",
			"acme.cert-manager.io/v1, Resource=challenges": `conversion webhook for acme.cert-manager.io/v1alpha2, Kind=Challenge failed: Post "https://cert-manager-webhook.ops.svc:443/convert?timeout=30s": service "cert-manager-webhook" not found`,
		},
		Now: now,
	}
	d := Diagnose(f)
	var text bytes.Buffer
	if err := Render(&text, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "namespace-causes.golden", text.Bytes())
	if strings.Contains(text.String(), "the namespace is empty but") {
		t.Error("a namespace whose content cannot all be listed is called empty")
	}
	if n := d.Blocking(); n != 4 {
		t.Errorf("%d blocking findings, want 4: the APIService, the conversion webhook, the dead node, spec.finalizers", n)
	}
}
