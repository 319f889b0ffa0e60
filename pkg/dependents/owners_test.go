package dependents

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func owner(ns, name, uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
	}
}

func TestSetOwnerRemoveOwnerRoundTrip(t *testing.T) {
	d := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: map[string]string{"keep": "me"}}}
	if err := SetOwner(d, owner("ns1", "a", "uid-a")); err != nil {
		t.Fatal(err)
	}
	if err := SetOwner(d, owner("ns2", "b", "uid-b")); err != nil {
		t.Fatal(err)
	}
	// Setting the same owner again updates its link, it does not add one.
	if err := SetOwner(d, owner("ns1", "a-renamed", "uid-a")); err != nil {
		t.Fatal(err)
	}
	want := `[{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns1","name":"a-renamed","uid":"uid-a"},{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns2","name":"b","uid":"uid-b"}]`
	if diff := cmp.Diff(want, d.Annotations[OwnersAnnotation]); diff != "" {
		t.Errorf("annotation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me", OwnedLabel: "true"}, d.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	links, err := Owners(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ConfigMap/ns1/a-renamed", "ConfigMap/ns2/b"}, []string{links[0].String(), links[1].String()}); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}

	if removed, err := RemoveOwner(d, "uid-x"); err != nil || removed {
		t.Errorf("RemoveOwner(unknown uid) = %v, %v; want false, nil", removed, err)
	}
	if removed, err := RemoveOwner(d, "uid-a"); err != nil || !removed {
		t.Fatalf("RemoveOwner(uid-a) = %v, %v; want true, nil", removed, err)
	}
	if removed, err := RemoveOwner(d, "uid-b"); err != nil || !removed {
		t.Fatalf("RemoveOwner(uid-b) = %v, %v; want true, nil", removed, err)
	}
	if _, ok := d.Annotations[OwnersAnnotation]; ok {
		t.Errorf("annotation kept after the last owner was removed: %v", d.Annotations)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, d.Labels); diff != "" {
		t.Errorf("labels after the last owner was removed (-want +got):\n%s", diff)
	}
}

func TestSetOwnerRejectsOwnerWithoutKind(t *testing.T) {
	d := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "d"}}
	o := owner("ns", "a", "uid-a")
	o.TypeMeta = metav1.TypeMeta{}
	err := SetOwner(d, o)
	if err == nil || !strings.Contains(err.Error(), "no apiVersion/kind") {
		t.Errorf("SetOwner = %v, want an error about apiVersion/kind", err)
	}
	o = owner("ns", "a", "")
	if err := SetOwner(d, o); err == nil || !strings.Contains(err.Error(), "uid is required") {
		t.Errorf("SetOwner = %v, want an error about the uid", err)
	}
	if len(d.Annotations) != 0 || len(d.Labels) != 0 {
		t.Errorf("dependent changed by a failed SetOwner: %v %v", d.Annotations, d.Labels)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
	}{
		{``, "empty value"},
		{`null`, "null"},
		{`{"kind":"Foo"}`, "cannot unmarshal object"},
		{`[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"u"}] x`, "trailing data"},
		{`[{"apiVersion":"v1","kind":"ConfigMap","name":"a"}]`, "owner [0]: uid is required"},
		{`[{"apiVersion":"v1","name":"a","uid":"u"}]`, "owner [0]: kind is required"},
		{`[{"kind":"ConfigMap","name":"a","uid":"u"}]`, "owner [0]: apiVersion is required"},
		{`[{"apiVersion":"a/b/c","kind":"ConfigMap","name":"a","uid":"u"}]`, `apiVersion "a/b/c"`},
		{`[{"apiVersion":"v1","kind":"ConfigMap","uid":"u"}]`, "name is required"},
		{`[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"u","namepsace":"x"}]`, `unknown field "namepsace"`},
		{`[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"u"},{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"u"}]`, "owner [1]: uid u listed twice"},
	} {
		_, err := Parse(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), OwnersAnnotation) {
			t.Errorf("Parse(%q) = %v, want an error naming %s and containing %q", tc.raw, err, OwnersAnnotation, tc.want)
		}
	}
}

func TestMalformedAnnotationIsNeverNoOwner(t *testing.T) {
	d := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "d", Annotations: map[string]string{OwnersAnnotation: "[{"}}}
	if links, err := Owners(d); err == nil {
		t.Errorf("Owners = %v, nil; want an error", links)
	}
	if err := SetOwner(d, owner("ns", "a", "uid-a")); err == nil {
		t.Error("SetOwner over a malformed annotation succeeded; want an error")
	}
	if _, err := RemoveOwner(d, "uid-a"); err == nil {
		t.Error("RemoveOwner over a malformed annotation succeeded; want an error")
	}
	if d.Annotations[OwnersAnnotation] != "[{" {
		t.Errorf("malformed annotation overwritten: %q", d.Annotations[OwnersAnnotation])
	}
}

func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		label     string
		confirmed bool
		want      Policy
		effective Policy
		finalizer bool
	}{
		{"", false, PolicyDelete, PolicyDelete, false},
		{"Delete", false, PolicyDelete, PolicyDelete, false},
		{"Background", false, PolicyDelete, PolicyDelete, false},
		{"Foreground", false, PolicyForeground, PolicyForeground, true},
		{"Orphan", true, PolicyOrphan, PolicyOrphan, true},
		{"OrphanUnlessConfirmed", false, PolicyOrphanUnlessConfirmed, PolicyOrphan, true},
		{"OrphanUnlessConfirmed", true, PolicyOrphanUnlessConfirmed, PolicyDelete, true},
	} {
		o := owner("ns", "a", "u")
		if tc.label != "" {
			o.Labels = map[string]string{PolicyLabel: tc.label}
		}
		if tc.confirmed {
			o.Annotations = map[string]string{ConfirmDeletionAnnotation: "true"}
		}
		p, err := PolicyOf(o)
		if err != nil {
			t.Fatalf("PolicyOf(%q): %v", tc.label, err)
		}
		if p != tc.want || p.Effective(o) != tc.effective || p.NeedsFinalizer() != tc.finalizer {
			t.Errorf("label %q confirmed %v: policy %s effective %s finalizer %v; want %s %s %v",
				tc.label, tc.confirmed, p, p.Effective(o), p.NeedsFinalizer(), tc.want, tc.effective, tc.finalizer)
		}
	}
	o := owner("ns", "a", "u")
	o.Labels = map[string]string{PolicyLabel: "orphan"}
	if _, err := PolicyOf(o); err == nil || !strings.Contains(err.Error(), `unknown policy "orphan"`) {
		t.Errorf("PolicyOf(orphan) = %v, want an unknown-policy error", err)
	}
}
