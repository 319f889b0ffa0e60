package lien

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestStatusWriteOnce is an error path (a fake client: a real API server
// does not fail a status write on demand): the status is written in one
// patch at the end of the reconcile; a failed write is the reconcile's
// error, not dropped, and a conflict requeues without one.
func TestStatusWriteOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		write     error // what the status write answers
		wantErr   string
		wantRes   reconcile.Result
		wantReady bool // Ready written
	}{
		{"written", nil, "", reconcile.Result{RequeueAfter: resync}, true},
		{"refused", apierrors.NewInternalError(errors.New("etcd is unavailable")), "writing the status of Lien app/web", reconcile.Result{}, false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "liens"}, "web", errors.New("changed")), "", reconcile.Result{RequeueAfter: reconciler.ConflictRetry}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			l := &v1alpha1.Lien{
				ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Generation: 1},
				Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{}}}, Reason: "in use"},
			}
			writes := 0
			c, r := fakeReconciler(t, l, func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				writes++
				if tc.write != nil {
					return tc.write
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			})
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(l)})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr == "" && gotErr != "" || !strings.Contains(gotErr, tc.wantErr) {
				t.Errorf("Reconcile error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("Reconcile result (-want +got):\n%s", diff)
			}
			if writes != 1 {
				t.Errorf("%d status writes, want 1", writes)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
				t.Fatal(err)
			}
			if got := apimeta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady) != nil; got != tc.wantReady {
				t.Errorf("Ready written: %v, want %v", got, tc.wantReady)
			}
			if !slices.Contains(l.Finalizers, CleanupFinalizer) {
				t.Errorf("finalizers %v, want %s", l.Finalizers, CleanupFinalizer)
			}
		})
	}
}

// TestFinalizerGoesAfterTheStatus is an error path (a fake client): a
// released lien's cleanup finalizer comes off only once its status, which
// says why it was released, is stored.
func TestFinalizerGoesAfterTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		write    error
		wantGone bool
	}{
		{"status written", nil, true},
		{"status refused", apierrors.NewInternalError(errors.New("etcd is unavailable")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			now := metav1.Now()
			l := &v1alpha1.Lien{
				ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Generation: 1, DeletionTimestamp: &now, Finalizers: []string{CleanupFinalizer}},
				Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}}, Reason: "in use"},
			}
			var held *metav1.Condition
			c, r := fakeReconciler(t, l, func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				held = apimeta.FindStatusCondition(obj.(*v1alpha1.Lien).Status.Conditions, v1alpha1.ConditionHeld)
				if tc.write != nil {
					return tc.write
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			})
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(l)})
			if (err != nil) == tc.wantGone {
				t.Errorf("Reconcile error %v, want one: %v", err, !tc.wantGone)
			}
			if held == nil || held.Reason != v1alpha1.ReasonReleased {
				t.Errorf("Held written %+v, want %s", held, v1alpha1.ReasonReleased)
			}
			err = c.Get(ctx, client.ObjectKeyFromObject(l), l)
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("lien gone: %v (%v), want %v", gone, err, tc.wantGone)
			}
		})
	}
}

// fakeReconciler is a Lien reconciler on a fake client holding l, whose
// status writes go through write.
func fakeReconciler(t *testing.T, l *v1alpha1.Lien, write func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error) (client.Client, *Reconciler) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(l).WithStatusSubresource(&v1alpha1.Lien{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: write}).Build()
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	return c, &Reconciler{
		markers:   markers{Client: c, APIReader: c, Mapper: mapper, Recorder: events.NewFakeRecorder(100)},
		newObject: func() object { return lienObj{&v1alpha1.Lien{}} },
		watched:   map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "ConfigMap"}: true},
	}
}

// TestNoResultWithAnError is an error path (a fake client): a conflict
// writing the status requeues without an error, but after a reconcile that
// failed it returns that error alone, with no result: controller-runtime
// ignores a result returned with an error (and warns that it did), so the
// retry is the error's back-off.
func TestNoResultWithAnError(t *testing.T) {
	failed := errors.New("the lien markers of ConfigMap app/a could not be written")
	for _, tc := range []struct {
		name      string
		reconcile error // what the reconcile itself returned
		wantRes   reconcile.Result
	}{
		{"reconciled", nil, reconcile.Result{RequeueAfter: reconciler.ConflictRetry}},
		{"failed", failed, reconcile.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Generation: 1}}
			_, r := fakeReconciler(t, l, func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "liens"}, "web", errors.New("changed"))
			})
			o := lienObj{l.DeepCopy()}
			before := o.status().DeepCopy()
			o.status().ObservedGeneration = 1 // something to write
			res, err := r.patchStatus(t.Context(), o, before, false, reconcile.Result{RequeueAfter: resync}, tc.reconcile)
			if !errors.Is(err, tc.reconcile) || (err == nil) != (tc.reconcile == nil) {
				t.Errorf("patchStatus error %v, want %v", err, tc.reconcile)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("patchStatus result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMarkersConflictRequeuesQuietly is an error path (a fake client: a
// real API server does not lose every write on demand): when each try of
// editMarkers loses to someone else's write, the markers controller
// requeues quietly, as the lien controllers do, rather than with an
// error.
func TestMarkersConflictRequeuesQuietly(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a"}}
	if _, err := lien.Set(cm, lien.Entry{Lien: lien.Key("app", "gone")}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			patches++
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("changed"))
		}}).Build()
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, apimeta.RESTScopeNamespace)
	m := markers{Client: c, APIReader: c, Mapper: mapper, Recorder: events.NewFakeRecorder(100)}
	r := &markersReconciler{markers: m, liens: []*Reconciler{{
		markers:   m,
		newObject: func() object { return lienObj{&v1alpha1.Lien{}} },
		watched:   map[schema.GroupVersionKind]bool{{Version: "v1", Kind: "ConfigMap"}: true},
	}}}
	res, err := r.Reconcile(t.Context(), markerRequest{lien: lien.Key("app", "gone")})
	if err != nil {
		t.Errorf("Reconcile error %v, want none", err)
	}
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: reconciler.ConflictRetry}, res); diff != "" {
		t.Errorf("Reconcile result (-want +got):\n%s", diff)
	}
	if patches == 0 {
		t.Error("no marker write was tried")
	}
}
