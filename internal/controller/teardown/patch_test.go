package teardown

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestPatchStatusErrorWins: when the reconcile or the writes after it
// failed, patchStatus returns the error alone. controller-runtime ignores
// a result returned with an error (and warns): the error's rate-limited
// retry is what happens, so a result beside it only misleads. The API
// server fails the writes (fake client, error paths only).
func TestPatchStatusErrorWins(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	conflict := apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("teardowns").GroupResource(), "plan", errors.New("the object has been modified"))
	unavailable := apierrors.NewServiceUnavailable("restarting")
	failed := errors.New("the tick failed")
	for _, tc := range []struct {
		name        string
		status      error // of the status patch
		meta        error // of the metadata patch
		resumed     bool
		res         reconcile.Result
		err         error
		wantErr     bool
		wantRequeue bool
	}{
		{name: "the reconcile failed, the status patch conflicted", status: conflict, err: failed, wantErr: true},
		{name: "the status patch failed after a requeue asked for", status: unavailable, res: reconcile.Result{RequeueAfter: time.Second}, wantErr: true},
		{name: "taking the resume annotation off failed", meta: unavailable, resumed: true, res: reconcile.Result{RequeueAfter: time.Second}, wantErr: true},
		{name: "the status patch conflicted", status: conflict, wantRequeue: true},
		{name: "taking the resume annotation off conflicted", meta: conflict, resumed: true, wantRequeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "plan", Annotations: map[string]string{v1alpha1.RunFromStepAnnotation: "a"}}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(plan).WithStatusSubresource(plan).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
						if tc.meta != nil {
							return tc.meta
						}
						return c.Patch(ctx, obj, patch, opts...)
					},
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
						if tc.status != nil {
							return tc.status
						}
						return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
					},
				}).Build()
			r := &Reconciler{Client: c}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(plan), plan); err != nil {
				t.Fatal(err)
			}
			before := plan.DeepCopy()
			plan.Status.Phase = v1alpha1.PhaseRunning
			res, err := r.patchStatus(t.Context(), plan, before, tc.resumed, tc.res, tc.err)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %t", err, tc.wantErr)
			}
			if err != nil && res != (reconcile.Result{}) {
				t.Errorf("result %+v returned with the error %v: controller-runtime ignores it", res, err)
			}
			if tc.wantRequeue && res.IsZero() {
				t.Errorf("result %+v, want a requeue", res)
			}
			if !tc.wantRequeue && !tc.wantErr {
				if diff := cmp.Diff(tc.res, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
		})
	}
}
