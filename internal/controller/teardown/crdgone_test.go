//go:build integration

package teardown_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// TestAStepOfAKindWhoseCRDWent: helm uninstall deletes the operator's CRD
// with its CRs, and the CRD goes a moment after its last CR, often after
// the runner's REST mapper read the kind. Listing it then answers 404:
// nothing of the kind is left, so the step's selection is empty (not an
// error retried for ever, which held the trigger of TestOperatorUninstall's
// plan), and the mapper reads again.
func TestAStepOfAKindWhoseCRDWent(t *testing.T) {
	ctx := t.Context()
	gadget := crd(t, "crdgone.example.com", "Gadget", "gadgets", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "crd-gone")
	create(t, custom(gadget, ns, "g1", nil))
	r, err := runner.New(cfg, scheme)
	if err != nil {
		t.Fatal(err)
	}
	step := v1alpha1.TeardownStep{Name: "delete-gadgets", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{
		APIVersion: gadget.GroupVersion().String(), Kind: gadget.Kind, AllNamespaces: true, Selector: &metav1.LabelSelector{},
	}}}
	objs, err := r.Gather(ctx, step)
	if err != nil || len(objs) != 1 {
		t.Fatalf("gathering the Gadgets while served: %v, %v; want g1", objs, err)
	}
	def := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.crdgone.example.com"}}
	if err := k.Delete(ctx, def); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Gadget CRD gone", func(ctx context.Context) (bool, error) { return gone(ctx, def) })
	// The mapper still maps Gadget: the list it sends answers 404.
	if _, err := r.Client.RESTMapper().RESTMapping(gadget.GroupKind(), gadget.Version); err != nil {
		t.Fatalf("the runner's mapper should still know Gadget from before: %v", err)
	}
	objs, err = r.Gather(ctx, step)
	if err != nil || len(objs) != 0 {
		t.Fatalf("gathering the Gadgets once their CRD went: %v, %v; want nothing and no error", objs, err)
	}
}
