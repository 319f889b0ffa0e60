package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// record is a release record's "release" value as Helm writes it: base64
// of gzip of the release's JSON.
func record(t *testing.T, manifest string) []byte {
	t.Helper()
	return recordOf(t, map[string]any{"name": "op", "manifest": manifest, "info": map[string]any{"status": "uninstalling"}})
}

// recordOf is record of any release JSON.
func recordOf(t *testing.T, rel map[string]any) []byte {
	t.Helper()
	js, err := json.Marshal(rel)
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

func TestObjectsReadsTheManifest(t *testing.T) {
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
	objs, err := Objects(record(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetAPIVersion()+" "+o.GetKind()+" "+strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
	}
	want := []string{"v1 ServiceAccount op", "rbac.authorization.k8s.io/v1 ClusterRole op", "teardown.dev/v1alpha1 Teardown ignored-for-cluster-scope/op-uninstall"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the manifest (-want +got):\n%s", diff)
	}
}

func TestObjectsRefusesWhatItCannotRead(t *testing.T) {
	for name, data := range map[string][]byte{
		"not base64":     []byte("%%%"),
		"not JSON":       []byte(base64.StdEncoding.EncodeToString([]byte("{"))),
		"bad manifest":   record(t, "apiVersion: [\nkind"),
		"bad apiVersion": record(t, "apiVersion: a/b/c\nkind: X\nmetadata: {name: x}\n"),
	} {
		if _, err := Objects(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadValuesReadsTheChartsAndTheUsers(t *testing.T) {
	data := recordOf(t, map[string]any{
		"name":   "op",
		"chart":  map[string]any{"metadata": map[string]any{"name": "op"}, "values": map[string]any{"extraObjects": []any{}, "replicas": 1.0}},
		"config": map[string]any{"replicas": 2.0},
	})
	got, err := ReadValues(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Values{Chart: map[string]any{"extraObjects": []any{}, "replicas": 1.0}, User: map[string]any{"replicas": 2.0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if _, err := ReadValues([]byte("%%%")); err == nil {
		t.Error("not base64: no error")
	}
}
