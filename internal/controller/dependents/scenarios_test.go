//go:build integration

package dependents

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// installCRD installs a v1 CRD of group/kind and waits until it serves.
func installCRD(t testing.TB, group, kind, plural string, namespaced bool) schema.GroupVersionResource {
	t.Helper()
	scope := apiextensionsv1.ClusterScoped
	if namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
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
	ext := apiextensions.NewForConfigOrDie(cfg)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
	eventually(t, "CRD "+crd.Name+" to serve", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	return gvr
}

func createCR(t testing.TB, gvr schema.GroupVersionResource, kind, ns, name string, owners ...links.Object) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind, "metadata": map[string]any{"name": name}}}
	u.SetNamespace(ns)
	for _, o := range owners {
		if err := links.SetOwner(u, o); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func getU(gvr schema.GroupVersionResource, ns, name string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

// TestSriov is the sriov case: a namespaced SriovNetwork-like CR owns
// NetworkAttachmentDefinition-like objects in two other namespaces and a
// cluster-scoped object. Deleting the CR deletes all three; deleting its
// namespace does too. Both CRDs are installed after the controller started.
func TestSriov(t *testing.T) {
	startController(t, nil)
	sriov := installCRD(t, "sriovnetwork.example.com", "SriovNetwork", "sriovnetworks", true)
	nad := installCRD(t, "k8s.cni.example.com", "NetworkAttachmentDefinition", "network-attachment-definitions", true)
	for i, byNamespace := range []bool{false, true} {
		op, a, b := fmt.Sprintf("sriov-op-%d", i), fmt.Sprintf("sriov-a-%d", i), fmt.Sprintf("sriov-b-%d", i)
		namespace(t, op)
		namespace(t, a)
		namespace(t, b)
		net := createCR(t, sriov, "SriovNetwork", op, "net1")
		createCR(t, nad, "NetworkAttachmentDefinition", a, "net1", net)
		createCR(t, nad, "NetworkAttachmentDefinition", b, "net1", net)
		role := fmt.Sprintf("sriov-net1-%d", i)
		clusterRole(t, role, net)
		if byNamespace {
			if err := kube.CoreV1().Namespaces().Delete(t.Context(), op, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if err := dyn.Resource(sriov).Namespace(op).Delete(t.Context(), "net1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone(t, "nad "+a+"/net1", getU(nad, a, "net1"))
		gone(t, "nad "+b+"/net1", getU(nad, b, "net1"))
		gone(t, "clusterrole/"+role, getCR(role))
	}
}

// TestNamespaceDeletionPolicies: a namespace holding an owner with a
// cluster-scoped dependent ends with the dependent deleted (Foreground) or
// kept and unlinked (Orphan), never silently orphaned.
func TestNamespaceDeletionPolicies(t *testing.T) {
	startController(t, nil)
	for _, p := range []links.Policy{links.PolicyForeground, links.PolicyOrphan} {
		ns := namespace(t, "nsdel-"+strings.ToLower(string(p)))
		owner := ownerCM(t, ns, "owner", p, false)
		role := "nsdel-" + strings.ToLower(string(p))
		clusterRole(t, role, owner)
		waitFinalizer(t, ns, "owner")
		if err := kube.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone(t, "namespace "+ns, func(ctx context.Context) error {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		})
		cr, err := kube.RbacV1().ClusterRoles().Get(t.Context(), role, metav1.GetOptions{})
		switch p {
		case links.PolicyForeground:
			if !apierrors.IsNotFound(err) {
				t.Errorf("Foreground: clusterrole/%s: %v, want it deleted", role, err)
			}
		case links.PolicyOrphan:
			if err != nil {
				t.Fatalf("Orphan: clusterrole/%s: %v, want it kept", role, err)
			}
			if _, ok := cr.Annotations[links.OwnersAnnotation]; ok {
				t.Errorf("Orphan: clusterrole/%s keeps its link to the deleted owner", role)
			}
		}
	}
}

// TestRestartMidDrain stops the controller in the middle of a drain of 500
// dependents and starts a new one: every dependent goes, and none with a
// live owner is ever deleted (a watch recorded from the start says so).
func TestRestartMidDrain(t *testing.T) {
	const n, shared = 500, 50
	ns1, ns2 := namespace(t, "drain-1"), namespace(t, "drain-2")
	a := ownerCM(t, ns1, "a", "", false)
	b := ownerCM(t, ns1, "b", "", false)
	w, err := kube.CoreV1().ConfigMaps(ns2).Watch(t.Context(), metav1.ListOptions{LabelSelector: links.OwnedLabel})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	deleted := map[string]bool{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				mu.Lock()
				deleted[ev.Object.(*corev1.ConfigMap).Name] = true
				mu.Unlock()
			}
		}
	}()
	for i := range n {
		if i < shared {
			depCM(t, ns2, fmt.Sprintf("shared-%03d", i), a, b)
		} else {
			depCM(t, ns2, fmt.Sprintf("d-%03d", i), a)
		}
	}

	var deletes atomic.Int64
	var first *running
	stopped := make(chan struct{})
	first = startController(t, func(ctx context.Context, r request) {
		if deletes.Add(1) == 100 {
			go func() { first.stop(); close(stopped) }()
		}
	})
	if err := kube.CoreV1().ConfigMaps(ns1).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	<-stopped
	left, err := kube.CoreV1().ConfigMaps(ns2).List(t.Context(), metav1.ListOptions{LabelSelector: links.OwnedLabel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controller stopped with %d of %d dependents left", len(left.Items), n)
	if len(left.Items) <= shared {
		t.Errorf("the drain had finished before the restart (%d left): not a mid-drain restart", len(left.Items))
	}
	startController(t, nil)
	eventually(t, "the drain to finish", func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().ConfigMaps(ns2).List(ctx, metav1.ListOptions{LabelSelector: links.OwnedLabel})
		if err != nil {
			return false, err
		}
		if len(l.Items) != shared {
			return false, nil
		}
		for _, cm := range l.Items {
			if len(ownerNames(t, &cm)) != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	mustExist(t, "owner b", getCM(ns1, "b"))
	w.Stop()
	<-watched
	mu.Lock()
	defer mu.Unlock()
	for i := range shared {
		if name := fmt.Sprintf("shared-%03d", i); deleted[name] {
			t.Errorf("%s, which has the live owner b, was deleted", name)
		}
	}
	if got := len(deleted); got != n-shared {
		t.Errorf("%d dependents deleted, want %d", got, n-shared)
	}
}
