//go:build integration

package teardown_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	controller "github.com/teardown-dev/teardown/internal/controller/teardown"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
)

var (
	cfg    *rest.Config
	scheme = testenv.Scheme()
	// k is the test's own client, as the cluster admin.
	k client.Client
	// stop stops the running controller manager; nil when stopped.
	stop context.CancelFunc
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error {
		cfg = c
		var err error
		if k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		return startController()
	}, stopController)
}

// startController runs teardown's controller manager (lien, dependents and
// teardown controllers) in this process, as the cluster admin.
func startController() error { return startControllerAs(cfg) }

// startControllerAs runs the manager with as's identity.
func startControllerAs(as *rest.Config) error { return startManager(as, manager.Options{}) }

// startManager runs the manager with as's identity and options o (no
// metrics or probe servers).
func startManager(as *rest.Config, o manager.Options) error {
	return startManagerWith(as, o, nil)
}

// startManagerWith runs the manager as startManager does, with the
// teardown controller set up with options to instead of the manager's
// (when to is not nil).
func startManagerWith(as *rest.Config, o manager.Options, to *controller.Options) error {
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	if to != nil {
		o.Disabled = append(o.Disabled, "teardown")
	}
	mgr, err := manager.New(as, o)
	if err != nil {
		return err
	}
	if to != nil {
		if _, err := controller.Setup(mgr, *to); err != nil {
			return err
		}
	}
	s, err := testenv.StartManager(mgr)
	if err != nil {
		return err
	}
	stop = s
	return nil
}

func stopController() {
	if stop != nil {
		stop()
		stop = nil
	}
}

// eventually polls cond every 100ms for up to timeout.
var eventually = testenv.Eventually

// gone reports whether obj no longer exists.
func gone(ctx context.Context, obj client.Object) (bool, error) { return testenv.Gone(ctx, k, obj) }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// crd installs a CRD with a free-form schema and waits until it serves.
func crd(t *testing.T, group, kind, plural string, scope apiextensionsv1.ResourceScope) schema.GroupVersionKind {
	t.Helper()
	obj := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
			}},
		},
	}
	if err := k.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
	eventually(t, 30*time.Second, "CRD "+obj.Name+" to serve", func(ctx context.Context) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		return k.List(ctx, l) == nil, nil
	})
	return gvk
}

func custom(gvk schema.GroupVersionKind, namespace, name string, labels map[string]string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetFinalizers(finalizers)
	return u
}

// deployment is an operator's Deployment: with no kubelet and no
// deployment controller here, just the object.
func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "operator:latest"}}},
			},
		},
	}
}

// rbac is an operator's ClusterRole and binding for user.
func rbac(name, user string, rules ...rbacv1.PolicyRule) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
		}
}

// operator is an operator's finalizer loop, run in the test with the
// operator's identity: for every object of the kinds that is being
// deleted, it removes its finalizer. Every error it meets is recorded:
// a Forbidden means it lost its RBAC before it finished.
type operator struct {
	c      client.Client
	mu     sync.Mutex
	errs   []string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startOperator(t *testing.T, user, finalizer string, kinds ...schema.GroupVersionKind) *operator {
	t.Helper()
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(as, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // not t.Context(): it runs until its cleanup
	op := &operator{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(op.done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, gvk := range kinds {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.List(ctx, l); err != nil {
					op.record(ctx, err, finalizer, kinds)
					continue
				}
				for i := range l.Items {
					o := &l.Items[i]
					if o.GetDeletionTimestamp() == nil || !controllerutil.RemoveFinalizer(o, finalizer) {
						continue
					}
					if err := c.Update(ctx, o); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
						op.record(ctx, err, finalizer, kinds)
					}
				}
			}
			return false, nil
		})
	}()
	t.Cleanup(op.stop)
	return op
}

// record keeps err if the operator still had work: an object of its kinds
// carrying its finalizer (read as the admin). Losing its rights once it
// finished is what an uninstall does.
func (op *operator) record(ctx context.Context, err error, finalizer string, kinds []schema.GroupVersionKind) {
	if apierrors.IsNotFound(err) || ctx.Err() != nil {
		return
	}
	work := false
	for _, gvk := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if k.List(ctx, l) != nil {
			work = true
			continue
		}
		for _, o := range l.Items {
			work = work || controllerutil.ContainsFinalizer(&o, finalizer)
		}
	}
	if !work || ctx.Err() != nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	op.errs = append(op.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
}

func (op *operator) stop() {
	op.once.Do(func() {
		op.cancel()
		<-op.done
	})
}

func (op *operator) errors() []string {
	op.mu.Lock()
	defer op.mu.Unlock()
	return append([]string(nil), op.errs...)
}

// waitPhase waits until the Teardown reaches phase and returns it.
func waitPhase(t *testing.T, name string, phase v1alpha1.TeardownPhase, timeout time.Duration) *v1alpha1.Teardown {
	t.Helper()
	td := &v1alpha1.Teardown{}
	eventually(t, timeout, fmt.Sprintf("teardown %s to be %s", name, phase), func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKey{Name: name}, td); err != nil {
			return false, err
		}
		return td.Status.Phase == phase, nil
	})
	return td
}

// waitArmed waits until the Teardown's Armed condition is True.
func waitArmed(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "teardown "+name+" to be armed", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKey{Name: name}, td); err != nil {
			return false, err
		}
		for _, c := range td.Status.Conditions {
			if c.Type == v1alpha1.ConditionArmed && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func deleteAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k.Delete(t.Context(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", o.GetName(), err)
		}
	}
}

// uninstall deletes objs as helm uninstall does: every DELETE is sent,
// and those refused (objects a plan keeps) are returned by name, not
// fatal. Any other error is.
func uninstall(t *testing.T, objs ...client.Object) map[string]error {
	t.Helper()
	refused := map[string]error{}
	for _, o := range objs {
		err := k.Delete(t.Context(), o)
		switch {
		case apierrors.IsForbidden(err):
			refused[o.GetName()] = err
		case err != nil && !apierrors.IsNotFound(err):
			t.Fatalf("deleting %s: %v", o.GetName(), err)
		}
	}
	return refused
}

// keptByPlan checks that the DELETE of each of kept was refused because
// the plan keeps it, and that it carries no deletionTimestamp (which would
// end its tokens a minute later).
func keptByPlan(t *testing.T, plan string, refused map[string]error, kept ...client.Object) {
	t.Helper()
	want := "kept by Teardown " + plan + " until its plan finishes; deleted then"
	for _, o := range kept {
		if err := refused[o.GetName()]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the DELETE of %s %s should be refused with %q, got %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), want, err)
		}
		if err := k.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Errorf("%s should be there without a deletionTimestamp: %v %v", o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
}

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// wantReady checks td's Ready condition: status and reason, for its
// generation.
func wantReady(t *testing.T, td *v1alpha1.Teardown, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != td.Generation {
		t.Errorf("Ready = %+v, want status %s reason %s for generation %d", c, status, reason, td.Generation)
	}
}
