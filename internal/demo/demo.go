// Package demo replays, on a real control plane, the deletions that
// Kubernetes gets wrong, and prints for a person what happened at each step.
// `teardown demo` runs it on the local control plane; the e2e tests run the
// same scenarios and assert their outcome.
package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Scenario is one replayed problem.
type Scenario struct {
	Name  string
	Title string
	Run   func(ctx context.Context, e *Env) (Outcome, error)
}

// Outcome is what a scenario observed.
type Outcome struct {
	// Left lists objects that should be gone but are not, as kind/name.
	Left []string
	// Summary is the verdict line printed at the end.
	Summary string
}

// Env is what scenarios act through.
type Env struct {
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Extensions apiextensions.Interface
	out        io.Writer
	step       int

	teardownStarted bool
}

// NewEnv connects the clients a scenario uses.
func NewEnv(cfg *rest.Config, out io.Writer) (*Env, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, Kube: kube, Dynamic: dyn, Extensions: ext, out: out}, nil
}

// Scenarios are the problems the demo replays, in order.
var Scenarios = []Scenario{namespaceOrphansClusterScoped, crossScopeOwners, whyStuckNamespace}

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

// fooCRD is the custom resource of the Helm-based operator in the scenarios.
var fooCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "foos.example.com"},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com",
		Scope: apiextensionsv1.NamespaceScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Singular: "foo", Kind: "Foo", ListKind: "FooList"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: new(true),
			}},
		}},
	},
}

// ensureFooCRD installs the Foo CRD and waits until it serves.
func (e *Env) ensureFooCRD(ctx context.Context) error {
	_, err := e.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, fooCRD, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", fooCRD.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Dynamic.Resource(fooGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
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

// namespaceOrphansClusterScoped is problem 1: a Helm-based operator's CR
// lives in a namespace, the objects its chart rendered at cluster scope
// cannot be owned by it, and deleting the namespace leaves them behind.
var namespaceOrphansClusterScoped = Scenario{
	Name:  "namespace-orphans-cluster-scoped",
	Title: "Deleting a namespace orphans the cluster-scoped objects its operator created",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		const ns, foo = "foohome", "myfoo"
		release := "sh.helm.release.v1." + foo + ".v1"
		roleName := ns + "-" + foo + "-foo"
		if err := e.ensureFooCRD(ctx); err != nil {
			return Outcome{}, err
		}
		if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		cr, err := e.Dynamic.Resource(fooGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Foo",
			"metadata": map[string]any{"name": foo},
		}}, metav1.CreateOptions{})
		if err != nil {
			return Outcome{}, fmt.Errorf("creating Foo %s/%s: %w", ns, foo, err)
		}
		_, err = e.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: release, Labels: map[string]string{"owner": "helm", "name": foo}},
			Type:       "helm.sh/release.v1",
		}, metav1.CreateOptions{})
		if err != nil {
			return Outcome{}, fmt.Errorf("creating the release record: %w", err)
		}
		e.say("namespace %s holds foo/%s and its Helm release record secret/%s", ns, foo, release)

		// What an operator would try: an ownerReference from the cluster-scoped
		// object to the namespaced CR. The garbage collector refuses it.
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
			Name:        roleName,
			Annotations: map[string]string{"meta.helm.sh/release-name": foo, "meta.helm.sh/release-namespace": ns},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "example.com/v1", Kind: "Foo", Name: foo, UID: cr.GetUID(),
			}},
		}}
		if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("creating clusterrole %s: %w", roleName, err)
		}
		e.say("the operator renders clusterrole/%s for %s/%s, with an ownerReference to foo/%s\nKubernetes cannot honour it: a cluster-scoped object cannot have a namespaced owner", roleName, ns, foo, foo)

		took, err := e.deleteNamespace(ctx, ns, 2*time.Minute)
		if err != nil {
			return Outcome{}, err
		}
		e.say("kubectl delete namespace %s: gone after %s, with foo/%s and the release record", ns, took.Round(100*time.Millisecond), foo)

		var out Outcome
		if _, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); err == nil {
			out.Left = append(out.Left, "clusterrole/"+roleName)
			_, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}}, metav1.CreateOptions{})
			detail := ""
			if msg := e.event(ctx, metav1.NamespaceDefault, "ClusterRole", roleName, "OwnerRefInvalidNamespace", 2*time.Second); msg != "" {
				detail = "\nkube-controller-manager warned: OwnerRefInvalidNamespace: " + msg
			}
			e.say("clusterrole/%s is still there and nothing will ever delete it%s\nre-installing myfoo elsewhere fails: %v", roleName, detail, err)
			out.Summary = fmt.Sprintf("without teardown: ORPHANED %s", strings.Join(out.Left, ", "))
			// Leave the cluster as we found it.
			_ = e.Kube.RbacV1().ClusterRoles().Delete(ctx, roleName, metav1.DeleteOptions{})
		} else if apierrors.IsNotFound(err) {
			e.say("clusterrole/%s was deleted along with its namespace", roleName)
			out.Summary = "nothing left behind"
		} else {
			return Outcome{}, err
		}
		return out, nil
	},
}
