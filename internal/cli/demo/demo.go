package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// Scenario is one replayed problem.
type Scenario struct {
	Name  string
	Title string
	Run   func(ctx context.Context, e *Env) (Outcome, error)
}

// Outcome is what a scenario observed.
type Outcome struct {
	// Left lists objects that should be gone but are not, with teardown,
	// as kind/name.
	Left []string
	// LeftWithout lists what the same scenario left behind without
	// teardown: the problem, reproduced.
	LeftWithout []string
	// Summary is the verdict line printed at the end.
	Summary string
}

// Env is what scenarios act through.
type Env struct {
	cmdutil.Clientsets
	Config *rest.Config
	// Progress is where slow preparations (building examples/helm-operator
	// the first time) report how far they are; nil shows nothing.
	Progress io.Writer
	// Services routes a Service to a local process: the local control
	// plane's. Nil on another cluster (--use-cluster), where the
	// real-operator scenario is skipped.
	Services harness.Services
	out      io.Writer
	step     int
}

// NewEnv connects the clients a scenario uses.
func NewEnv(cfg *rest.Config, out io.Writer) (*Env, error) {
	cs, err := cmdutil.NewClientsets(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Clientsets: cs, Config: cfg, out: out}, nil
}

// Scenarios are the problems the demo replays, in order.
var Scenarios = []Scenario{namespaceOrphansClusterScoped, operatorUninstall, crossScopeOwners, whyStuckNamespace, realSriovUninstall}

// Lookup returns the scenario with the given name, or nil.
func Lookup(name string) *Scenario {
	for i := range Scenarios {
		if Scenarios[i].Name == name {
			return &Scenarios[i]
		}
	}
	return nil
}

// Run replays every scenario and prints what happened.
func Run(ctx context.Context, e *Env) ([]Outcome, error) {
	var outcomes []Outcome
	for i, s := range Scenarios {
		fmt.Fprintf(e.out, "\n%d. %s\n", i+1, s.Title)
		e.step = 0
		o, err := s.Run(ctx, e)
		if err != nil {
			return outcomes, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		fmt.Fprintf(e.out, "   => %s\n", o.Summary)
		outcomes = append(outcomes, o)
	}
	return outcomes, nil
}

// say prints one numbered step, with indented detail lines.
func (e *Env) say(format string, args ...any) {
	e.step++
	lines := strings.Split(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintf(e.out, "   %c) %s\n", 'a'+e.step-1, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(e.out, "      %s\n", l)
	}
}

var fooGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "foos"}

// ensureFooCRD installs the Foo CRD and waits until it serves.
func (e *Env) ensureFooCRD(ctx context.Context) error {
	return e.ensureCRD(ctx, crdFor(fooGVR, "Foo", apiextensionsv1.NamespaceScoped), fooGVR)
}

// deleteNamespace deletes ns as `kubectl delete namespace` does and waits
// until it is gone, returning how long that took.
func (e *Env) deleteNamespace(ctx context.Context, ns string, timeout time.Duration) (time.Duration, error) {
	started := time.Now()
	if err := e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return 0, fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for namespace %s to be gone: %w", ns, err)
	}
	return time.Since(started), nil
}

// event waits up to timeout for an event with reason on the object and
// returns its message, or "" if none came.
func (e *Env) event(ctx context.Context, ns, kind, name, reason string, timeout time.Duration) string {
	var msg string
	selector := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		msg = list.Items[0].Message
		return true, nil
	})
	return msg
}

// createTyped creates a typed object (one of teardown's own kinds) through
// the dynamic client.
func (e *Env) createTyped(ctx context.Context, obj runtime.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	m, err := e.mapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	un := &unstructured.Unstructured{Object: u}
	_, err = e.Dynamic.Resource(m.Resource).Namespace(un.GetNamespace()).Create(ctx, un, metav1.CreateOptions{})
	return err
}

func (e *Env) mapper() meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
}
