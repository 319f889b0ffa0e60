package lien

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProblems(t *testing.T) {
	deny := `[{"lien":"app/keep","reason":"r"}]`
	deferred := `[{"lien":"keep","reason":"r","mode":"Defer"}]`
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		finalizers  []string
		deleting    bool
		want        []string
	}{
		{name: "no markers", finalizers: []string{Finalizer}},
		{name: "deny, consistent", labels: map[string]string{Label: LabelDeny}, annotations: map[string]string{Annotation: deny}},
		{name: "defer, consistent", labels: map[string]string{Label: LabelDefer}, annotations: map[string]string{Annotation: deferred}, finalizers: []string{Finalizer}},
		{name: "defer while deleting, finalizer gone", labels: map[string]string{Label: LabelDefer}, annotations: map[string]string{Annotation: deferred}, deleting: true},
		{name: "poison", labels: map[string]string{Label: LabelDeny}, annotations: map[string]string{Annotation: "poison"},
			want: []string{"annotation teardown.dev/liens is not a JSON list of liens"}},
		{name: "an entry without a lien", annotations: map[string]string{Annotation: `[{"reason":"r"}]`},
			want: []string{"annotation teardown.dev/liens is not a JSON list of liens"}},
		{name: "a lien twice", labels: map[string]string{Label: LabelDeny}, annotations: map[string]string{Annotation: `[{"lien":"a/b"},{"lien":"a/b"}]`},
			want: []string{"annotation teardown.dev/liens is not a JSON list of liens"}},
		{name: "label without annotation", labels: map[string]string{Label: LabelDeny},
			want: []string{`label teardown.dev/lien="true" without any lien entry`}},
		{name: "label stripped", annotations: map[string]string{Annotation: deny},
			want: []string{`label teardown.dev/lien is "", the entries give "true"`}},
		{name: "defer label on a deny entry", labels: map[string]string{Label: LabelDefer}, annotations: map[string]string{Annotation: deny},
			want: []string{`label teardown.dev/lien is "defer", the entries give "true"`}},
		{name: "defer entry without finalizer", labels: map[string]string{Label: LabelDefer}, annotations: map[string]string{Annotation: deferred},
			want: []string{"a Defer entry without the finalizer teardown.dev/lien"}},
		{name: "finalizer without defer entry", labels: map[string]string{Label: LabelDeny}, annotations: map[string]string{Annotation: deny}, finalizers: []string{Finalizer},
			want: []string{"the finalizer teardown.dev/lien without a Defer entry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := secret(tt.labels, tt.annotations, tt.finalizers...)
			if tt.deleting {
				s.DeletionTimestamp = &metav1.Time{}
			}
			if diff := cmp.Diff(tt.want, Problems(s)); diff != "" {
				t.Errorf("Problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSalvage(t *testing.T) {
	tests := []struct {
		raw  string
		want []Entry
	}{
		{raw: "poison"},
		{raw: `{"lien":"a/b"}`},
		{raw: `[{"lien":"a/b","reason":"r"},7,{"reason":"no lien"},{"lien":"a/b","reason":"again"},{"lien":"c","mode":"Defer"}]`,
			want: []Entry{{Lien: "a/b", Reason: "r"}, {Lien: "c", Mode: ModeDefer}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Salvage(secret(nil, map[string]string{Annotation: tt.raw}))); diff != "" {
			t.Errorf("Salvage(%s) (-want +got):\n%s", tt.raw, diff)
		}
	}
}

func TestSetRefusesTheLienBeyondTheCap(t *testing.T) {
	s := secret(nil, nil)
	for i := range MaxEntries {
		if _, err := Set(s, Entry{Lien: fmt.Sprintf("app/l%02d", i), Reason: "r"}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if _, err := Set(s, Entry{Lien: "app/l05", Reason: "changed"}); err != nil {
		t.Errorf("replacing an entry at the cap: %v", err)
	}
	_, err := Set(s, Entry{Lien: "app/one-too-many", Reason: "r"})
	if err == nil || !strings.Contains(err.Error(), "most liens") {
		t.Fatalf("entry %d: got %v, want ErrTooManyLiens", MaxEntries+1, err)
	}
	if n := strings.Count(s.Annotations[Annotation], `"lien"`); n != MaxEntries {
		t.Errorf("%d entries after a refused Set, want %d", n, MaxEntries)
	}
}
