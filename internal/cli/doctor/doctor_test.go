package doctor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/pkg/lien"
)

func TestFinalizerManagers(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:finalizers":{".":{},"v:\"kubernetes\"":{}}}}`)},
		{Manager: "foo-operator", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/cleanup\"":{}},"f:labels":{"f:app":{}}},"f:spec":{"f:size":{}}}`)},
		{Manager: "broken", FieldsV1: metav1.NewFieldsV1(`not json`)},
	}
	want := map[string]Setter{"kubernetes": {Manager: "kubectl-create"}, "example.com/cleanup": {Manager: "foo-operator"}}
	if diff := cmp.Diff(want, FinalizerManagers(fields)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestExplain(t *testing.T) {
	c := &Controllers{
		Workloads: []Workload{
			{Kind: "deployment", Namespace: "foo-system", Name: "controller-manager", Programs: []string{"manager", "manager"}, Ready: 1, Desired: 1},
			{Kind: "deployment", Namespace: "bar-system", Name: "bar-operator", Programs: []string{"bar-operator"}, Ready: 0, Desired: 1},
			{Kind: "statefulset", Namespace: "argocd", Name: "argocd-application-controller", Programs: []string{"argocd-application-controller"}, Ready: 1, Desired: 1},
			{Kind: "daemonset", Namespace: "longhorn-system", Name: "longhorn-manager", Programs: []string{"longhorn-manager"}, Ready: 0, Desired: 3},
			{Kind: "pod", Namespace: "tools", Name: "sweeper", Programs: []string{"sweeper"}, Ready: 1, Desired: 1},
		},
		Leases: []Lease{
			{Namespace: "baz-system", Name: "a1b2c3.baz.example.com", Holder: "pod-1_uuid", Fresh: true},
			{Namespace: "kube-system", Name: "kube-controller-manager", Holder: "node-1", Fresh: false},
		},
	}
	tests := []struct {
		fin      string
		setter   Setter
		state    State
		remover  string
		evidence string
	}{
		{"example.com/cleanup", Setter{Manager: "manager"}, Running, "manager", "deployment foo-system/controller-manager: 1/1 ready"},
		{"bar.example.com/cleanup", Setter{Manager: "bar-operator"}, NotRunning, "bar-operator", "deployment bar-system/bar-operator: 0/1 ready"},
		{"baz.example.com/finalizer", Setter{Manager: "some-binary"}, Running, "some-binary", "leader lease baz-system/a1b2c3.baz.example.com renewed by pod-1_uuid"},
		{"qux.example.org/finalizer", Setter{Manager: "qux"}, Gone, "qux", `no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching "qux" or "qux.example.org" found`},
		{"sweep.example.org/done", Setter{Manager: "sweeper"}, Running, "sweeper", "pod tools/sweeper: 1/1 ready"},
		// Written from a manifest: the writer is not the remover.
		{"example.org/by-hand", Setter{Manager: "kubectl-patch"}, Unknown, "unknown", `kubectl wrote it from a manifest or by hand, so managedFields do not say which controller removes it; no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching "example.org" found`},
		{"by-hand", Setter{Manager: "kubectl-edit"}, Unknown, "unknown", "kubectl wrote it from a manifest or by hand, so managedFields do not say which controller removes it; it has no domain to look for a controller by"},
		{"resources-finalizer.argocd.argoproj.io", Setter{Manager: "argocd-server", Applied: true}, Running, "Argo CD's application controller", "statefulset argocd/argocd-application-controller: 1/1 ready"},
		{"resources-finalizer.argocd.argoproj.io/background", Setter{Manager: "kubectl-client-side-apply"}, Running, "Argo CD's application controller", "statefulset argocd/argocd-application-controller: 1/1 ready"},
		{"longhorn.io", Setter{}, NotRunning, "longhorn-manager", "daemonset longhorn-system/longhorn-manager: 0/3 ready"},
		{"example.org", Setter{}, Unknown, "unknown", "managedFields do not say who added it; it has no domain to look for a controller by"},
		{"node.longhorn.io/finalizer", Setter{Manager: "longhorn-manager"}, NotRunning, "longhorn-manager", "daemonset longhorn-system/longhorn-manager: 0/3 ready"},
		{"bar.example.com/applied", Setter{Manager: "bar-deployer", Applied: true}, Unknown, "bar-deployer", `written by server-side apply as bar-deployer, which may be a deployment tool; no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching "bar-deployer" or "bar.example.com" found`},
		{"kubernetes", Setter{}, NotRunning, "the namespace controller of kube-controller-manager", "leader lease kube-system/kube-controller-manager expired (last holder node-1)"},
		{"customresourcecleanup.apiextensions.k8s.io", Setter{}, Running, "kube-apiserver (apiextensions)", "kube-apiserver answers"},
	}
	for _, tt := range tests {
		v := c.Explain(tt.fin, tt.setter)
		if v.State != tt.state || v.Remover != tt.remover || v.Evidence != tt.evidence {
			t.Errorf("Explain(%s, %+v) = %s, %s: %s\nwant %s, %s: %s", tt.fin, tt.setter, v.Remover, v.State, v.Evidence, tt.remover, tt.state, tt.evidence)
		}
	}
	// Kinds the user may not list make a remover not found unknown, not gone.
	if v := (&Controllers{Unlisted: []string{"pods"}}).Explain("qux.example.org/finalizer", Setter{Manager: "qux"}); v.State != Unknown || v.Stuck() {
		t.Errorf("with pods unlisted: %s (%s), want unknown", v.State, v.Evidence)
	}
	if v := (&Controllers{}).Explain("kubernetes", Setter{}); v.State != Unknown {
		t.Errorf("without a lease the controller manager is unknown, got %s", v.State)
	}
}

func TestKubernetesOwned(t *testing.T) {
	for fin, want := range map[string]bool{
		"kubernetes": true, "foregroundDeletion": true, "orphan": true,
		"kubernetes.io/pvc-protection": true, "kubernetes.io/anything-new": true,
		"batch.kubernetes.io/job-tracking": true, "external-provisioner.volume.kubernetes.io/finalizer": true,
		"customresourcecleanup.apiextensions.k8s.io": true, "snapshot.storage.k8s.io/volumesnapshot-as-source-protection": true,
		"cluster.cluster.x-k8s.io": false, "cluster.x-k8s.io/finalizer": false, "example.com/cleanup": false,
		"resources-finalizer.argocd.argoproj.io": false, "notkubernetes.io/x": false, lien.Finalizer: false,
	} {
		if got := KubernetesOwned(fin); got != want {
			t.Errorf("KubernetesOwned(%s) = %v, want %v", fin, got, want)
		}
	}
}

// Every entry of the known-finalizer table says what removes it and where
// that is documented.
func TestKnownFinalizersHaveSources(t *testing.T) {
	for _, k := range KnownFinalizers {
		if k.Component == "teardown" {
			continue
		}
		if k.Remover == "" || k.When == "" || !strings.HasPrefix(k.Source, "https://") {
			t.Errorf("%+v: want remover, when and an https source", k)
		}
		if n := btoi(k.Name != "") + btoi(k.Prefix != "") + btoi(k.Domain != ""); n != 1 {
			t.Errorf("%+v: want exactly one of name, prefix, domain", k)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSetter(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{
		{Manager: "argocd-controller", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{"v:\"resources-finalizer.argocd.argoproj.io\"":{}}}}`)},
	}
	s := FinalizerManagers(fields)["resources-finalizer.argocd.argoproj.io"]
	if s != (Setter{Manager: "argocd-controller", Applied: true}) || s.ManifestTool() != "Argo CD" {
		t.Errorf("setter %+v (tool %q)", s, s.ManifestTool())
	}
}

func TestLiensOf(t *testing.T) {
	got := LiensOf(
		map[string]string{lien.Label: lien.LabelDeny, CrossplaneInUse: "true"},
		map[string]string{lien.Annotation: `[{"lien":"ns/keep","reason":"needed"},{"lien":"global"}]`},
		nil,
	)
	want := []Lien{
		{Name: "ns/keep", Reason: "needed", Mode: "Deny", Source: "teardown"},
		{Name: "global", Mode: "Deny", Source: "teardown"},
		{Name: "a Crossplane Usage", Reason: "label crossplane.io/in-use", Mode: "Deny", Source: "crossplane"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := LiensOf(nil, nil, []string{lien.Finalizer}); len(got) != 1 || got[0].Mode != "Defer" || got[0].Name != "(unnamed)" {
		t.Errorf("a lien finalizer without annotation: %+v", got)
	}
}

// TestLiensOfModePerEntry: each entry takes its mode from its own lien, as
// the lien wrote it (lien.Entry.Mode), not from the label the strictest
// entry sets.
func TestLiensOfModePerEntry(t *testing.T) {
	for _, tt := range []struct {
		name        string
		labels      map[string]string
		annotations string
		finalizers  []string
		want        []Lien
	}{
		{
			name:        "a Defer lien beside a Deny lien",
			labels:      map[string]string{lien.Label: lien.LabelDeny},
			annotations: `[{"lien":"ns/keep","reason":"needed"},{"lien":"later","reason":"until done","mode":"Defer"}]`,
			finalizers:  []string{lien.Finalizer},
			want: []Lien{
				{Name: "ns/keep", Reason: "needed", Mode: "Deny", Source: "teardown"},
				{Name: "later", Reason: "until done", Mode: "Defer", Source: "teardown"},
			},
		},
		{
			name:        "Defer liens only",
			labels:      map[string]string{lien.Label: lien.LabelDefer},
			annotations: `[{"lien":"later","reason":"until done","mode":"Defer"}]`,
			finalizers:  []string{lien.Finalizer},
			want:        []Lien{{Name: "later", Reason: "until done", Mode: "Defer", Source: "teardown"}},
		},
		{
			name:        "unreadable entries under the Deny label",
			labels:      map[string]string{lien.Label: lien.LabelDeny},
			annotations: `not json`,
			finalizers:  []string{lien.Finalizer},
			want:        []Lien{{Name: "(unnamed)", Reason: "annotation teardown.dev/liens missing or unreadable", Mode: "Deny", Source: "teardown"}},
		},
		{
			name:        "no markers",
			annotations: `[{"lien":"gone","reason":"r"}]`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := LiensOf(tt.labels, map[string]string{lien.Annotation: tt.annotations}, tt.finalizers)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWebhookMatches(t *testing.T) {
	cluster := admissionv1.ClusterScope
	w := Webhook{
		FailClosed: true, Service: "guard/guard",
		Rules: []admissionv1.RuleWithOperations{
			{Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
			{Operations: []admissionv1.OperationType{admissionv1.OperationAll}, Rule: admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &cluster}},
		},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}},
	}
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	tests := []struct {
		name string
		r    Request
		want bool
	}{
		{"delete configmap in guarded ns", Request{GVR: cm, Namespaced: true, Operation: admissionv1.Delete, NamespaceLabels: map[string]string{"guarded": "yes"}}, true},
		{"delete configmap elsewhere", Request{GVR: cm, Namespaced: true, Operation: admissionv1.Delete}, false},
		{"update configmap", Request{GVR: cm, Namespaced: true, Operation: admissionv1.Update, NamespaceLabels: map[string]string{"guarded": "yes"}}, false},
		{"delete clusterrole", Request{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Operation: admissionv1.Delete}, true},
		{"delete unguarded namespace", Request{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Operation: admissionv1.Delete}, false},
	}
	for _, tt := range tests {
		if got := w.Matches(tt.r); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !w.Down() {
		t.Error("a fail-closed webhook without endpoints is down")
	}
	w.ReadyEndpoints = 1
	if w.Down() {
		t.Error("a webhook with a ready endpoint is up")
	}
}

// Each Teardown plan's own finalizer on its trigger is teardown's.
func TestPlanFinalizerIsTeardowns(t *testing.T) {
	c := &Controllers{Workloads: []Workload{{Kind: "deployment", Namespace: "teardown-system", Name: "teardown-controller", Ready: 1, Desired: 1}}}
	v := c.Explain("teardown.dev/teardown-sriov-operator-uninstall", Setter{Manager: "teardown-teardown"})
	if !strings.Contains(v.Remover, "teardown controller") || v.When != "once the plan sriov-operator-uninstall has finished" || v.Stuck() {
		t.Errorf("Explain: %+v; want teardown's, waiting for the plan, running", v)
	}
}

// Teardown's controller runs when its heartbeat, renewed with leader
// election on or off, is fresh in a namespace of teardown's; a heartbeat
// elsewhere is not believed and makes it unknown, never running or gone.
func TestTeardownHeartbeat(t *testing.T) {
	hb := func(ns string, fresh bool) Lease {
		return Lease{Namespace: ns, Name: "teardown-controller-heartbeat", Holder: "host_1234", Fresh: fresh}
	}
	ours := []string{"teardown-system", "ops"}
	tests := []struct {
		name     string
		c        Controllers
		state    State
		evidence string
	}{
		{"fresh heartbeat, no workload, no leader lease (--leader-elect=false, from a workstation)",
			Controllers{Heartbeats: []Lease{hb("teardown-system", true)}, TeardownNamespaces: ours},
			Running, "heartbeat Lease teardown-system/teardown-controller-heartbeat renewed by host_1234"},
		{"in the chart's namespace, named by the Trust",
			Controllers{Heartbeats: []Lease{hb("ops", true)}, TeardownNamespaces: ours},
			Running, "heartbeat Lease ops/teardown-controller-heartbeat renewed by host_1234"},
		{"expired: the controller stopped",
			Controllers{Heartbeats: []Lease{hb("teardown-system", false)}, TeardownNamespaces: ours},
			NotRunning, "heartbeat Lease teardown-system/teardown-controller-heartbeat expired (last renewed by host_1234)"},
		{"released: the controller stopped cleanly",
			Controllers{Heartbeats: []Lease{{Namespace: "teardown-system", Name: "teardown-controller-heartbeat"}}, TeardownNamespaces: ours},
			NotRunning, "heartbeat Lease teardown-system/teardown-controller-heartbeat released: the controller stopped"},
		{"expired heartbeat, but the leader lease is renewed (an older replica)",
			Controllers{Heartbeats: []Lease{hb("teardown-system", false)}, Leases: []Lease{{Namespace: "teardown-system", Name: "teardown-controller.teardown.dev", Holder: "pod-1_uuid", Fresh: true}}, TeardownNamespaces: ours},
			Running, "leader lease teardown-system/teardown-controller.teardown.dev renewed by pod-1_uuid"},
		{"fresh only in a tenant's namespace",
			Controllers{Heartbeats: []Lease{hb("tenant", true)}, TeardownNamespaces: ours},
			Unknown, "heartbeat Lease tenant/teardown-controller-heartbeat renewed by host_1234, but tenant is not teardown's namespace (teardown-system, ops): anyone who may write Leases there could have written it"},
		{"a tenant's Deployment named teardown-controller, the Trust read",
			Controllers{Workloads: []Workload{{Kind: "deployment", Namespace: "tenant", Name: "teardown-controller", Ready: 1, Desired: 1}}, TeardownNamespaces: ours, TrustRead: true},
			Unknown, "deployment tenant/teardown-controller: 1/1 ready, outside teardown's namespaces (teardown-system, ops): not believed"},
		{"the chart's Deployment, the Trust read",
			Controllers{Workloads: []Workload{{Kind: "deployment", Namespace: "ops", Name: "teardown-controller", Ready: 1, Desired: 1}}, TeardownNamespaces: ours, TrustRead: true},
			Running, "deployment ops/teardown-controller: 1/1 ready"},
		{"a Deployment anywhere, the Trust not read",
			Controllers{Workloads: []Workload{{Kind: "deployment", Namespace: "elsewhere", Name: "teardown-controller", Ready: 1, Desired: 1}}, TeardownNamespaces: []string{"teardown-system"}},
			Running, "deployment elsewhere/teardown-controller: 1/1 ready"},
		{"nothing at all",
			Controllers{TeardownNamespaces: ours},
			Gone, `no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching "teardown" or "teardown-controller" or "teardown.dev" found, and no heartbeat Lease teardown-controller-heartbeat in teardown-system or ops`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.c.Explain(lien.Finalizer, Setter{Manager: "teardown"})
			if v.State != tt.state || v.Evidence != tt.evidence {
				t.Errorf("Explain = %s: %s\nwant %s: %s", v.State, v.Evidence, tt.state, tt.evidence)
			}
		})
	}
}
