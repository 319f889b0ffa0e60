package reconciler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

func TestRequeueOnConflict(t *testing.T) {
	conflict := apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("teardowns").GroupResource(), "plan", errors.New("the object has been modified"))
	failed := errors.New("failed")
	later := reconcile.Result{RequeueAfter: time.Minute}
	for _, tc := range []struct {
		name    string
		res     reconcile.Result
		err     error
		want    reconcile.Result
		wantErr error
	}{
		{"done", reconcile.Result{}, nil, reconcile.Result{}, nil},
		{"again later", later, nil, later, nil},
		{"an error wins over a result", later, failed, reconcile.Result{}, failed},
		{"a conflict requeues quietly", later, conflict, reconcile.Result{RequeueAfter: ConflictRetry}, nil},
		{"a wrapped conflict too", reconcile.Result{}, fmt.Errorf("holding the trigger: %w", conflict), reconcile.Result{RequeueAfter: ConflictRetry}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := RequeueOnConflict(tc.res, tc.err)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// newClient is a fake client holding a Teardown named plan: for the
// error paths only (the controllers' integration tests show the writes).
func newClient(t *testing.T) (client.Client, *v1alpha1.Teardown) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	plan := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "plan"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(plan).WithStatusSubresource(plan).Build()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(plan), plan); err != nil {
		t.Fatal(err)
	}
	return c, plan
}

// someoneElseWrites changes plan's labels on the server, after plan was read.
func someoneElseWrites(t *testing.T, c client.Client, plan *v1alpha1.Teardown) {
	t.Helper()
	other := plan.DeepCopy()
	other.Labels = map[string]string{"someone": "else"}
	if err := c.Update(t.Context(), other); err != nil {
		t.Fatal(err)
	}
}

func TestPatchStatusConflict(t *testing.T) {
	c, plan := newClient(t)
	before := plan.DeepCopy()
	someoneElseWrites(t, c, plan)
	plan.Status.Phase = v1alpha1.PhaseRunning
	if err := PatchStatus(t.Context(), c, plan, before); !apierrors.IsConflict(err) {
		t.Errorf("error %v, want a conflict", err)
	}
}

func TestPatchStatusNotFound(t *testing.T) {
	c, plan := newClient(t)
	before := plan.DeepCopy()
	if err := c.Delete(t.Context(), plan.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	plan.Status.Phase = v1alpha1.PhaseRunning
	if err := PatchStatus(t.Context(), c, plan, before); !apierrors.IsNotFound(err) {
		t.Errorf("error %v, want not found", err)
	}
}

func TestPatchMetaConflict(t *testing.T) {
	c, plan := newClient(t)
	someoneElseWrites(t, c, plan)
	plan.Status.Phase = v1alpha1.PhaseRunning
	err := PatchMeta(t.Context(), c, plan, func(p *v1alpha1.Teardown) { p.Finalizers = append(p.Finalizers, v1alpha1.TeardownFinalizer) })
	if !apierrors.IsConflict(err) {
		t.Errorf("error %v, want a conflict", err)
	}
	if len(plan.Finalizers) != 0 || plan.Status.Phase != v1alpha1.PhaseRunning {
		t.Errorf("a failed patch changed the object in memory: finalizers %v, phase %q", plan.Finalizers, plan.Status.Phase)
	}
}

func TestPatchMetaNotFound(t *testing.T) {
	c, plan := newClient(t)
	if err := c.Delete(t.Context(), plan.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	err := PatchMeta(t.Context(), c, plan, func(p *v1alpha1.Teardown) { p.Finalizers = nil })
	if !apierrors.IsNotFound(err) {
		t.Errorf("error %v, want not found", err)
	}
}
