package teardown

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// record is a release record's "release" value as Helm writes it: base64
// of gzip of the release's JSON.
func record(t *testing.T, manifest string) []byte {
	t.Helper()
	js, err := json.Marshal(map[string]any{"name": "op", "manifest": manifest, "info": map[string]any{"status": "uninstalling"}})
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

func TestReleaseObjectsReadsTheManifest(t *testing.T) {
	manifest := `---
# Source: op/templates/sa.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: op
---
# Source: op/templates/empty.yaml
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: op
rules: []
---
apiVersion: teardown.dev/v1alpha1
kind: Teardown
metadata:
  name: op-uninstall
  namespace: ignored-for-cluster-scope
`
	objs, err := releaseObjects(record(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetAPIVersion()+" "+o.GetKind()+" "+qualified(o.GetNamespace(), o.GetName()))
	}
	want := []string{"v1 ServiceAccount op", "rbac.authorization.k8s.io/v1 ClusterRole op", "teardown.dev/v1alpha1 Teardown ignored-for-cluster-scope/op-uninstall"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the manifest (-want +got):\n%s", diff)
	}
}

func TestReleaseObjectsRefusesWhatItCannotRead(t *testing.T) {
	for name, data := range map[string][]byte{
		"not base64":     []byte("%%%"),
		"not JSON":       []byte(base64.StdEncoding.EncodeToString([]byte("{"))),
		"bad manifest":   record(t, "apiVersion: [\nkind"),
		"bad apiVersion": record(t, "apiVersion: a/b/c\nkind: X\nmetadata: {name: x}\n"),
	} {
		if _, err := releaseObjects(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestHelmReleaseIsTheTriggersNamespaces: Helm's annotations on a
// Teardown name the release whose records the controller may remove; one
// naming a release outside the trigger's namespace, or a plan without a
// trigger, names none, so whoever may annotate a Teardown cannot point it
// at another namespace's records.
func TestHelmReleaseIsTheTriggersNamespaces(t *testing.T) {
	plan := func(triggerNS string, annotations map[string]string) *v1alpha1.Teardown {
		td := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations}}
		if triggerNS != "-" {
			td.Spec.Trigger = &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: triggerNS, Name: "op"}
		}
		return td
	}
	helm := map[string]string{helmReleaseNameAnnotation: "op", helmReleaseNamespaceAnnotation: "op-system"}
	for _, tc := range []struct {
		name      string
		td        *v1alpha1.Teardown
		release   string
		namespace string
	}{
		{"its own release", plan("op-system", helm), "op", "op-system"},
		{"another namespace's release", plan("tenant", helm), "", ""},
		{"no trigger", plan("-", helm), "", ""},
		{"a cluster-scoped trigger", plan("", helm), "", ""},
		{"no annotations", plan("op-system", nil), "", ""},
	} {
		release, ns := helmRelease(tc.td)
		if release != tc.release || ns != tc.namespace {
			t.Errorf("%s: helmRelease = %q, %q; want %q, %q", tc.name, release, ns, tc.release, tc.namespace)
		}
	}
}
