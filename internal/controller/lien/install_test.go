//go:build integration

package lien

import (
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/install"
)

// TestInstallIsIdempotent applies teardown's manifests a second time (the
// first was TestMain's): no object changes.
func TestInstallIsIdempotent(t *testing.T) {
	ctx := t.Context()
	opts := install.Options{ControllerUsers: []string{"teardown:admin"}}
	objs, err := install.Objects(opts)
	if err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			if err := k.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
				t.Fatalf("%s %s not installed: %v", o.GetKind(), o.GetName(), err)
			}
			out[o.GetKind()+"/"+o.GetName()] = live.GetResourceVersion()
		}
		return out
	}
	before := versions()
	if err := install.Apply(ctx, cfg, opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	after := versions()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed on the second install (resourceVersion %s -> %s)", k, v, after[k])
		}
	}
}
