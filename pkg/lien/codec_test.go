package lien

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func secret(labels, annotations map[string]string, finalizers ...string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: "foohome", Name: "release", Labels: labels, Annotations: annotations, Finalizers: finalizers,
	}}
}

func TestSetAndRemove(t *testing.T) {
	deny := Entry{Lien: "foohome/keep-release", Reason: "needed to uninstall"}
	deferred := Entry{Lien: "keep-rbac", Reason: "operator cleanup", Mode: ModeDefer}
	tests := []struct {
		name           string
		obj            *corev1.Secret
		set            []Entry
		remove         []string
		wantLabel      string // "" means no label
		wantAnnotation string
		wantFinalizers []string
	}{
		{
			name: "deny lien", obj: secret(nil, nil), set: []Entry{deny},
			wantLabel: LabelDeny, wantAnnotation: `[{"lien":"foohome/keep-release","reason":"needed to uninstall"}]`,
		},
		{
			name: "defer lien adds the finalizer", obj: secret(map[string]string{"app": "x"}, nil, "other"), set: []Entry{deferred},
			wantLabel: LabelDefer, wantAnnotation: `[{"lien":"keep-rbac","reason":"operator cleanup","mode":"Defer"}]`,
			wantFinalizers: []string{"other", Finalizer},
		},
		{
			name: "deny and defer compose, sorted", obj: secret(nil, nil), set: []Entry{deferred, deny},
			wantLabel:      LabelDeny,
			wantAnnotation: `[{"lien":"foohome/keep-release","reason":"needed to uninstall"},{"lien":"keep-rbac","reason":"operator cleanup","mode":"Defer"}]`,
			wantFinalizers: []string{Finalizer},
		},
		{
			name: "removing one of two keeps the other", obj: secret(nil, nil), set: []Entry{deferred, deny}, remove: []string{"foohome/keep-release"},
			wantLabel: LabelDefer, wantAnnotation: `[{"lien":"keep-rbac","reason":"operator cleanup","mode":"Defer"}]`,
			wantFinalizers: []string{Finalizer},
		},
		{
			name: "removing the last takes every marker off", obj: secret(map[string]string{"app": "x"}, map[string]string{"note": "y"}, "other"),
			set: []Entry{deferred, deny}, remove: []string{"foohome/keep-release", "keep-rbac"},
			wantFinalizers: []string{"other"},
		},
		{
			name: "a terminating object gets no new finalizer", obj: func() *corev1.Secret {
				s := secret(nil, nil, "other")
				s.DeletionTimestamp = &metav1.Time{}
				return s
			}(),
			set: []Entry{deferred}, wantLabel: LabelDefer,
			wantAnnotation: `[{"lien":"keep-rbac","reason":"operator cleanup","mode":"Defer"}]`, wantFinalizers: []string{"other"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, e := range tt.set {
				if _, err := Set(tt.obj, e); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range tt.remove {
				if _, err := Remove(tt.obj, l); err != nil {
					t.Fatal(err)
				}
			}
			if got := tt.obj.Labels[Label]; got != tt.wantLabel {
				t.Errorf("label %q, want %q", got, tt.wantLabel)
			}
			if got := tt.obj.Annotations[Annotation]; got != tt.wantAnnotation {
				t.Errorf("annotation %s, want %s", got, tt.wantAnnotation)
			}
			if diff := cmp.Diff(tt.wantFinalizers, tt.obj.Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetReportsChange(t *testing.T) {
	obj := secret(nil, nil)
	e := Entry{Lien: "foohome/a", Reason: "r"}
	if changed, _ := Set(obj, e); !changed {
		t.Error("first Set should change the object")
	}
	if changed, _ := Set(obj, e); changed {
		t.Error("second identical Set should not")
	}
	if changed, _ := Remove(obj, "foohome/other"); changed {
		t.Error("removing an absent lien should not change the object")
	}
}

func TestMalformedAnnotationIsAnErrorNotUnprotected(t *testing.T) {
	for _, raw := range []string{`{not json`, `[{"reason":"no name"}]`, `{"lien":"x"}`} {
		obj := secret(map[string]string{Label: LabelDeny}, map[string]string{Annotation: raw})
		if _, err := Entries(obj); err == nil {
			t.Errorf("Entries(%s): no error", raw)
		}
		if _, err := Remove(obj, "x"); err == nil {
			t.Errorf("Remove on %s: no error", raw)
		}
		if obj.Labels[Label] != LabelDeny || obj.Annotations[Annotation] != raw {
			t.Errorf("a failed Remove changed the object: %v %v", obj.Labels, obj.Annotations)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		raw     string
		want    []Entry
		wantErr bool
	}{
		{raw: ``},
		{raw: ` `},
		{raw: `[{"lien":"ns/keep","reason":"needed"},{"lien":"global","reason":"","mode":"Defer"}]`,
			want: []Entry{{Lien: "ns/keep", Reason: "needed"}, {Lien: "global", Mode: ModeDefer}}},
		{raw: `{not json`, wantErr: true},
		{raw: `[{"reason":"no name"}]`, wantErr: true},
		{raw: `[{"lien":"x"},{"lien":"x"}]`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.raw)
		if (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) error %v, want error %v", tt.raw, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.raw, diff)
		}
		obj := secret(nil, map[string]string{Annotation: tt.raw})
		if entries, errEntries := Entries(obj); (errEntries != nil) != (err != nil) || !cmp.Equal(entries, got) {
			t.Errorf("Entries and Parse disagree on %q: %v %v, %v %v", tt.raw, entries, errEntries, got, err)
		}
	}
}
