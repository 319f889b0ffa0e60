package finalizer

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// steps records the order finalizers ran in; ready says which are done.
type steps struct {
	ran   []string
	ready map[string]bool
	fail  string
}

func (s *steps) finalizer(name string) Finalizer {
	return Finalizer{Name: name, Finalize: func(ctx context.Context, obj metav1.Object) (bool, error) {
		s.ran = append(s.ran, name)
		if name == s.fail {
			return false, errors.New("boom")
		}
		return s.ready[name], nil
	}}
}

func deleting(finalizers ...string) *corev1.ConfigMap {
	now := metav1.Now()
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Finalizers: finalizers, DeletionTimestamp: &now}}
}

func TestAddsMissingFinalizersInOrderKeepingOthers(t *testing.T) {
	s := &steps{}
	fs := Finalizers{s.finalizer("a/webhooks"), s.finalizer("a/networks")}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"other/x", "a/networks"}}}
	res, err := fs.Apply(t.Context(), obj)
	if err != nil || !res.Changed {
		t.Fatalf("Apply: %+v, %v", res, err)
	}
	if diff := cmp.Diff([]string{"other/x", "a/networks", "a/webhooks"}, obj.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if res, _ := fs.Apply(t.Context(), obj); res.Changed {
		t.Error("a second Apply changed the object")
	}
	if len(s.ran) != 0 {
		t.Errorf("finalizers ran on a live object: %v", s.ran)
	}
}

func TestRunsInOrderStoppingAtTheFirstNotDone(t *testing.T) {
	tests := []struct {
		name        string
		ready       map[string]bool
		fail        string
		present     []string
		wantRan     []string
		wantLeft    []string
		wantPending string
		wantErr     bool
	}{
		{name: "all done", ready: map[string]bool{"1": true, "2": true, "3": true}, present: []string{"3", "other", "2", "1"},
			wantRan: []string{"1", "2", "3"}, wantLeft: []string{"other"}},
		{name: "second not done", ready: map[string]bool{"1": true}, present: []string{"1", "2", "3"},
			wantRan: []string{"1", "2"}, wantLeft: []string{"2", "3"}, wantPending: "2"},
		{name: "first already removed", ready: map[string]bool{"2": true}, present: []string{"2", "3"},
			wantRan: []string{"2", "3"}, wantLeft: []string{"3"}, wantPending: "3"},
		{name: "error stops and keeps it", ready: map[string]bool{"1": true}, fail: "2", present: []string{"1", "2", "3"},
			wantRan: []string{"1", "2"}, wantLeft: []string{"2", "3"}, wantPending: "2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &steps{ready: tt.ready, fail: tt.fail}
			fs := Finalizers{s.finalizer("1"), s.finalizer("2"), s.finalizer("3")}
			obj := deleting(tt.present...)
			res, err := fs.Apply(t.Context(), obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantRan, s.ran); diff != "" {
				t.Errorf("ran (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLeft, obj.Finalizers); diff != "" {
				t.Errorf("finalizers left (-want +got):\n%s", diff)
			}
			if res.Pending != tt.wantPending {
				t.Errorf("pending %q, want %q", res.Pending, tt.wantPending)
			}
		})
	}
}

func TestInvalidListsAreRefused(t *testing.T) {
	s := &steps{}
	for name, fs := range map[string]Finalizers{
		"unnamed":   {{Finalize: s.finalizer("x").Finalize}},
		"no func":   {{Name: "a"}},
		"duplicate": {s.finalizer("a"), s.finalizer("a")},
	} {
		if _, err := fs.Apply(t.Context(), deleting("a")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
