package lien

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestReadyIsNotTrueWhileMarkersAreMissing is an error path (a fake
// client, since a real API server does not fail one patch on demand):
// writing the markers of one of a lien's objects fails. The other object
// is still protected, and Ready says MarkersMissing, naming the one that
// failed, instead of True.
func TestReadyIsNotTrueWhileMarkersAreMissing(t *testing.T) {
	ctx := t.Context()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Generation: 1, Finalizers: []string{CleanupFinalizer}},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{}}},
			Reason:  "in use",
		},
	}
	objs := []client.Object{l,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "b"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Lien{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetName() == "b" {
					return apierrors.NewInternalError(errors.New("etcd is unavailable"))
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	r := &Reconciler{
		markers:   markers{Client: c, APIReader: c, Mapper: mapper, Recorder: events.NewFakeRecorder(100)},
		newObject: func() object { return lienObj{&v1alpha1.Lien{}} },
		list: func(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]object, error) {
			return nil, nil
		},
		watched: map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "ConfigMap"}: true},
	}

	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(l)})
	if err == nil {
		t.Fatal("Reconcile: no error, want one for the markers it could not write (a retry with back-off)")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
		t.Fatal(err)
	}
	ready := apimeta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady)
	want := "lien markers missing (writing them failed; retrying): ConfigMap app/b"
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonMarkersMissing || ready.Message != want {
		t.Errorf("Ready %+v, want False, %s, %q", ready, v1alpha1.ReasonMarkersMissing, want)
	}
	a := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	if a.Labels[lien.Label] != lien.LabelDeny {
		t.Errorf("ConfigMap a: label %q, want it protected all the same", a.Labels[lien.Label])
	}
	if len(l.Status.Protected) != 1 || l.Status.Protected[0].Name != "a" {
		t.Errorf("status.protected %v, want a only", l.Status.Protected)
	}
}
