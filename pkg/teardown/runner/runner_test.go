package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/refused"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// The tests in this file are error paths, on a fake client: a real API
// server does not refuse or conflict on demand. What the runner does to
// real objects is in runner_integration_test.go.

var configMaps = schema.GroupResource{Resource: "configmaps"}

// fakeRunner is a Runner on a fake client holding objs, whose calls go
// through funcs first.
func fakeRunner(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *Runner {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), apimeta.RESTScopeNamespace)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	mapper.Add(clusterLienKind, apimeta.RESTScopeRoot)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).
		WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	return &Runner{Client: c, Reader: c}
}

func forbidden(verb string) error {
	return apierrors.NewForbidden(configMaps, "", errors.New("user may not "+verb))
}

func deleteOf(name string) teardown.Action {
	return teardown.Action{Type: teardown.ActionDelete, Propagation: v1alpha1.PropagationBackground, Object: teardown.Object{
		APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name, UID: "uid-" + name, ResourceVersion: "1",
	}}
}

// TestDoRefusedDelete: a DELETE the API server refuses stops Do with a
// *refused.Error naming the request, the action not done.
func TestDoRefusedDelete(t *testing.T) {
	r := fakeRunner(t, interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return forbidden("delete")
		},
	})
	actions := []teardown.Action{deleteOf("a"), deleteOf("b")}
	err := r.Do(t.Context(), actions)
	var ref *refused.Error
	if !errors.As(err, &ref) {
		t.Fatalf("Do: %v, want a *refused.Error", err)
	}
	want := refused.Request{Verb: "delete", Resource: configMaps, Namespace: "ns", Name: "a"}
	if diff := cmp.Diff(want, ref.Request); diff != "" {
		t.Errorf("refused request (-want +got):\n%s", diff)
	}
	if actions[0].Done || actions[1].Done {
		t.Errorf("actions done after a refusal: %v, %v", actions[0].Done, actions[1].Done)
	}
}

// TestDoLeavesChangedAndGone: a DELETE whose preconditions failed
// (Conflict) or whose object is gone (NotFound) is no error and not done:
// the next tick reads again; the actions after it are still taken.
func TestDoLeavesChangedAndGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
	}{
		{"conflict", apierrors.NewConflict(configMaps, "a", errors.New("the UID in the precondition does not match"))},
		{"not found", apierrors.NewNotFound(configMaps, "a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deleted []string
			r := fakeRunner(t, interceptor.Funcs{
				Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
					deleted = append(deleted, obj.GetName())
					if obj.GetName() == "a" {
						return tc.answer
					}
					return nil
				},
			})
			actions := []teardown.Action{deleteOf("a"), deleteOf("b")}
			if err := r.Do(t.Context(), actions); err != nil {
				t.Fatalf("Do: %v", err)
			}
			if diff := cmp.Diff([]string{"a", "b"}, deleted); diff != "" {
				t.Errorf("DELETEs sent (-want +got):\n%s", diff)
			}
			if actions[0].Done || !actions[1].Done {
				t.Errorf("done: a %v, b %v; want a false, b true", actions[0].Done, actions[1].Done)
			}
		})
	}
}

// TestGatherRefusedList: a LIST the API server refuses is a
// *refused.Error naming it, not an empty selection.
func TestGatherRefusedList(t *testing.T) {
	r := fakeRunner(t, interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return forbidden("list")
		},
	})
	step := v1alpha1.TeardownStep{Name: "cms", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{
		APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Selector: &metav1.LabelSelector{},
	}}}
	objs, err := r.Gather(t.Context(), step)
	var ref *refused.Error
	if !errors.As(err, &ref) {
		t.Fatalf("Gather: %v objects, error %v; want a *refused.Error", len(objs), err)
	}
	want := refused.Request{Verb: "list", Resource: configMaps, Namespace: "ns"}
	if diff := cmp.Diff(want, ref.Request); diff != "" {
		t.Errorf("refused request (-want +got):\n%s", diff)
	}
}

// TestTickFailsAStepItCannotRun: a step the cluster cannot run as
// written (a namespaced kind without a namespace) fails the plan, named
// in the step's message, instead of being retried; nothing is listed.
func TestTickFailsAStepItCannotRun(t *testing.T) {
	r := fakeRunner(t, interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			t.Error("listed for a step that cannot run")
			return nil
		},
	})
	spec := &v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{Name: "cms", Delete: &v1alpha1.DeleteAction{
		Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{}},
	}}}}
	res, err := r.Tick(t.Context(), spec, v1alpha1.TeardownStatus{})
	if err != nil {
		t.Fatalf("Tick: %v", err)
	}
	if res.Status.Phase != v1alpha1.PhaseFailed || len(res.Status.Steps) != 1 || res.Status.Steps[0].State != v1alpha1.StepFailed {
		t.Fatalf("status %+v, want the plan and its step failed", res.Status)
	}
	if msg := res.Status.Steps[0].Message; !strings.Contains(msg, "ConfigMap is namespaced") {
		t.Errorf("step message %q, want it to say ConfigMap is namespaced", msg)
	}
}

// TestReleaseRefused: a DELETE of the keepUntilDone lien the API server
// refuses is Release's error, naming the request.
func TestReleaseRefused(t *testing.T) {
	lien := &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: teardown.KeepName("plan"), UID: "uid-lien"}}
	r := fakeRunner(t, interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return forbidden("delete")
		},
	}, lien)
	gone, err := r.Release(t.Context(), "plan")
	var ref *refused.Error
	if gone || !errors.As(err, &ref) {
		t.Fatalf("Release: gone %v, error %v; want not gone and a *refused.Error", gone, err)
	}
	if ref.Verb != "delete" || ref.Name != lien.Name {
		t.Errorf("refused request %+v, want the delete of %s", ref.Request, lien.Name)
	}
}

// TestSelfUninstallRefusesBadInput: SelfUninstall says what is wrong
// before it adds anything to the manager.
func TestSelfUninstallRefusesBadInput(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	t.Setenv("POD_NAME", "")
	valid := v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{Name: "cms", Delete: &v1alpha1.DeleteAction{
		Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Selector: &metav1.LabelSelector{}},
	}}}}
	for _, tc := range []struct {
		name string
		plan v1alpha1.Teardown
		opts []SelfOption
		want string
	}{
		{"no pod", v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "op"}, Spec: valid}, nil, "set POD_NAMESPACE and POD_NAME"},
		{"bad name", v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "Op_1"}, Spec: valid}, []SelfOption{WithPod("ns", "pod")}, `plan name "Op_1"`},
		{"no steps", v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "op"}}, []SelfOption{WithPod("ns", "pod")}, "self-uninstall plan op:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No manager: every refusal comes before it is used.
			err := SelfUninstall(nil, &tc.plan, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SelfUninstall: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestOwnDeploymentRefusesAForeignChain: the Deployment is only found by
// the pod's controller references, and only the one they name by UID.
func TestOwnDeploymentRefusesAForeignChain(t *testing.T) {
	controlledBy := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: typesUID(uid), Controller: ptr.To(true)}}
	}
	pod := func(owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op-1", OwnerReferences: owners}}
	}
	rs := func(owners []metav1.OwnerReference) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op-rs", OwnerReferences: owners}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op", UID: "uid-now"}}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want string
	}{
		{"no pod", nil, "reading the operator's pod ns/op-1"},
		{"pod without a ReplicaSet", []client.Object{pod(nil)}, "is not controlled by a ReplicaSet"},
		{"ReplicaSet without a Deployment", []client.Object{pod(controlledBy("ReplicaSet", "op-rs", "rs")), rs(nil)}, "is not controlled by a Deployment"},
		{"Deployment re-created", []client.Object{pod(controlledBy("ReplicaSet", "op-rs", "rs")), rs(controlledBy("Deployment", "op", "uid-before")), dep}, "was re-created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &self{r: fakeRunner(t, interceptor.Funcs{}, tc.objs...), o: selfOptions{namespace: "ns", pod: "op-1"}}
			got, err := s.ownDeployment(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ownDeployment: %v, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
}
