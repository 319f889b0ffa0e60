package orphans

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var (
	namespaces   = resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace"}
	secrets      = resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret", Namespaced: true}
	configmaps   = resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	clusterroles = resource.APIResource{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"}
	widgets      = resource.APIResource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
)

func obj(r resource.APIResource, ns, name string, mut func(*metav1.ObjectMeta)) *resource.Object {
	o := &resource.Object{Resource: r, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-" + ns + "-" + name)}}
	if mut != nil {
		mut(&o.ObjectMeta)
	}
	return o
}

func TestFindAndRender(t *testing.T) {
	helm := func(release, ns string) func(*metav1.ObjectMeta) {
		return func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{doctor.HelmReleaseName: release, doctor.HelmReleaseNS: ns}
		}
	}
	f := &Facts{
		Objects: []*resource.Object{
			obj(namespaces, "", "live", nil),
			obj(secrets, "live", "sh.helm.release.v1.kept.v1", func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"owner": "helm", "name": "kept"} }),
			obj(clusterroles, "", "gone-ns-role", helm("myfoo", "foohome")),
			obj(clusterroles, "", "no-record-role", helm("lost", "live")),
			obj(clusterroles, "", "kept-role", helm("kept", "live")),
			obj(configmaps, "live", "in-release-ns", helm("lost", "live")),
			obj(configmaps, "live", "child", func(m *metav1.ObjectMeta) {
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: "gone"}}
			}),
			obj(configmaps, "live", "linked", func(m *metav1.ObjectMeta) {
				m.Annotations = map[string]string{dependents.OwnersAnnotation: `[{"apiVersion":"example.com/v1","kind":"Widget","namespace":"live","name":"w","uid":"gone-w"}]`}
			}),
			obj(configmaps, "live", "unknown-owner", func(m *metav1.ObjectMeta) {
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "metrics.example.com/v1beta1", Kind: "Metric", Name: "m", UID: "x"}}
			}),
			obj(widgets, "live", "stuck", func(m *metav1.ObjectMeta) {
				m.Finalizers = []string{"example.com/cleanup"}
				m.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
			}),
		},
		Resources:    []resource.APIResource{namespaces, secrets, configmaps, clusterroles, widgets},
		Listed:       sets.New(namespaces.GroupKind(), secrets.GroupKind(), configmaps.GroupKind(), clusterroles.GroupKind(), widgets.GroupKind()),
		FailedGroups: sets.New("metrics.example.com/v1beta1", "metrics.example.com"),
		HelmReleases: sets.New("live/kept"),
		Controllers:  &doctor.Controllers{},
		// A leftover of an uninstalled policy engine, and one whose server is only down.
		Webhooks: []doctor.Webhook{
			{Configuration: "kyverno-resource-validating-webhook-cfg", Name: "validate.kyverno.svc-fail", FailClosed: true, Service: "kyverno/kyverno-svc", ServiceMissing: true,
				Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{"*"}, Resources: []string{"*"}}}}},
			{Configuration: "guard", Name: "guard.example.com", Mutating: true, FailClosed: true, Service: "guard/guard",
				Rules:             []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{""}, Resources: []string{"configmaps"}}}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}}},
			{Configuration: "open", Name: "open.example.com", Service: "gone/gone", ServiceMissing: true},
		},
		APIServices: []doctor.APIService{
			{Name: "v1beta1.metrics.k8s.io", Service: "kube-system/metrics-server", Reason: "ServiceNotFound", Message: `service/metrics-server in "kube-system" is not present`},
			{Name: "v1.slow.example.com", Service: "slow/slow", Reason: "FailedDiscoveryCheck", Message: "timeout"},
		},
	}
	found := Find(f)
	var text, js bytes.Buffer
	if err := Render(&text, found); err != nil {
		t.Fatal(err)
	}
	if err := RenderJSON(&js, found); err != nil {
		t.Fatal(err)
	}
	golden(t, "orphans.golden", text.Bytes())
	golden(t, "orphans.json.golden", js.Bytes())
}

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
