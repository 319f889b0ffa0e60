package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/pkg/dependents"
)

var (
	sriovGVR = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovnetworks"}
	nadGVR   = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
)

// crdFor is a schemaless CRD standing in for an operator's own.
func crdFor(gvr schema.GroupVersionResource, kind string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gvr.Resource + "." + gvr.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvr.Group,
			Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: gvr.Resource, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvr.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}
}

// sriovObjects is what the operator renders for one SriovNetwork: a
// NetworkAttachmentDefinition in each target namespace and a cluster-scoped
// ClusterRole.
type sriovObjects struct {
	opNS, name string
	targets    []string
	role       string
}

func (s sriovObjects) all() []string {
	var out []string
	for _, ns := range s.targets {
		out = append(out, "network-attachment-definition/"+ns+"/"+s.name)
	}
	return append(out, "clusterrole/"+s.role)
}

// create renders the objects; link says how they point at the SriovNetwork:
// native ownerReferences, or teardown.dev/owners links.
func (s sriovObjects) create(ctx context.Context, e *Env, link func(obj metav1.Object, owner *unstructured.Unstructured) error) error {
	net, err := e.Dynamic.Resource(sriovGVR).Namespace(s.opNS).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork",
		"metadata": map[string]any{"name": s.name},
		"spec":     map[string]any{"resourceName": "intelnics", "vlan": int64(100)},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating SriovNetwork %s/%s: %w", s.opNS, s.name, err)
	}
	for _, ns := range s.targets {
		nad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
			"metadata": map[string]any{"name": s.name, "namespace": ns},
			"spec":     map[string]any{"config": `{"type":"sriov","vlan":100}`},
		}}
		if err := link(nad, net); err != nil {
			return err
		}
		if _, err := e.Dynamic.Resource(nadGVR).Namespace(ns).Create(ctx, nad, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating NetworkAttachmentDefinition %s/%s: %w", ns, s.name, err)
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: s.role}}
	if err := link(role, net); err != nil {
		return err
	}
	if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating clusterrole %s: %w", s.role, err)
	}
	return nil
}

// present lists which of the objects exist, in all() order.
func (s sriovObjects) present(ctx context.Context, e *Env) ([]string, error) {
	var out []string
	for _, ns := range s.targets {
		_, err := e.Dynamic.Resource(nadGVR).Namespace(ns).Get(ctx, s.name, metav1.GetOptions{})
		if err == nil {
			out = append(out, "network-attachment-definition/"+ns+"/"+s.name)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	_, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, s.role, metav1.GetOptions{})
	if err == nil {
		out = append(out, "clusterrole/"+s.role)
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return out, nil
}

// waitPresent polls until present() equals want or timeout passes, and
// returns the last observation.
func (s sriovObjects) waitPresent(ctx context.Context, e *Env, want []string, timeout time.Duration) ([]string, error) {
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := s.present(ctx, e)
		return err == nil && slices.Equal(got, want), nil
	})
	return s.present(ctx, e)
}

func (s sriovObjects) deleteNetwork(ctx context.Context, e *Env) error {
	if err := e.Dynamic.Resource(sriovGVR).Namespace(s.opNS).Delete(ctx, s.name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting SriovNetwork %s/%s: %w", s.opNS, s.name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.Dynamic.Resource(sriovGVR).Namespace(s.opNS).Get(ctx, s.name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// crossScopeOwners is problem 3: an operator's namespaced CR owns objects
// in other namespaces and at cluster scope, which no ownerReference can
// express. Kubernetes' garbage collector deletes the cross-namespace
// dependents at once (their owner "is not" in their namespace) and never
// deletes the cluster-scoped one; teardown.dev/owners links make both go
// exactly when the owner goes.
var crossScopeOwners = Scenario{
	Name:  "cross-scope-owners",
	Title: "An operator's CR cannot own objects in other namespaces or at cluster scope (sriov)",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		s := sriovObjects{opNS: "sriov-network-operator", name: "intel-net", targets: []string{"tenant-a", "tenant-b"}, role: "sriov-intel-net-user"}
		if err := e.ensureCRD(ctx, crdFor(sriovGVR, "SriovNetwork", apiextensionsv1.NamespaceScoped), sriovGVR); err != nil {
			return Outcome{}, err
		}
		if err := e.ensureCRD(ctx, crdFor(nadGVR, "NetworkAttachmentDefinition", apiextensionsv1.NamespaceScoped), nadGVR); err != nil {
			return Outcome{}, err
		}
		for _, ns := range append([]string{s.opNS}, s.targets...) {
			if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				return Outcome{}, fmt.Errorf("creating namespace %s: %w", ns, err)
			}
		}
		defer func() {
			for _, ns := range append([]string{s.opNS}, s.targets...) {
				_ = e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
			_ = e.Kube.RbacV1().ClusterRoles().Delete(ctx, s.role, metav1.DeleteOptions{})
			for _, ns := range append([]string{s.opNS}, s.targets...) {
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
					_, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				})
			}
		}()

		// Without teardown: native ownerReferences.
		native := func(obj metav1.Object, owner *unstructured.Unstructured) error {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}})
			return nil
		}
		if err := s.create(ctx, e, native); err != nil {
			return Outcome{}, err
		}
		e.say("sriovnetwork %s/%s renders %s,\neach with an ownerReference to the SriovNetwork", s.opNS, s.name, strings.Join(s.all(), ", "))
		// The garbage collector starts watching a new CRD's kind on its next
		// resync (30 s), so this can take a while.
		got, err := s.waitPresent(ctx, e, []string{"clusterrole/" + s.role}, 90*time.Second)
		if err != nil {
			return Outcome{}, err
		}
		wrongly := []string{}
		for _, o := range s.all()[:len(s.targets)] {
			if !slices.Contains(got, o) {
				wrongly = append(wrongly, o)
			}
		}
		detail := ""
		if msg := e.event(ctx, s.targets[0], "NetworkAttachmentDefinition", s.name, "OwnerRefInvalidNamespace", 2*time.Second); msg != "" {
			detail = "\nkube-controller-manager: OwnerRefInvalidNamespace: " + msg
		}
		e.say("the garbage collector deleted %s while their owner exists:\nit looks for a namespaced owner in the dependent's own namespace%s", orNothing(wrongly), detail)
		if err := s.deleteNetwork(ctx, e); err != nil {
			return Outcome{}, err
		}
		detail = ""
		if msg := e.event(ctx, metav1.NamespaceDefault, "ClusterRole", s.role, "OwnerRefInvalidNamespace", 10*time.Second); msg != "" {
			detail = "\nkube-controller-manager: OwnerRefInvalidNamespace: " + msg
		}
		without, err := s.present(ctx, e)
		if err != nil {
			return Outcome{}, err
		}
		e.say("kubectl delete sriovnetwork %s -n %s: left behind: %s%s", s.name, s.opNS, orNothing(without), detail)
		if err := e.Kube.RbacV1().ClusterRoles().Delete(ctx, s.role, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return Outcome{}, err
		}

		// With teardown: teardown.dev/owners links.
		if err := e.StartTeardown(ctx); err != nil {
			return Outcome{}, err
		}
		linked := func(obj metav1.Object, owner *unstructured.Unstructured) error {
			return dependents.SetOwner(obj, owner)
		}
		if err := s.create(ctx, e, linked); err != nil {
			return Outcome{}, err
		}
		e.say("with teardown running: the same objects, linked by annotation %s\n(label %s=true) instead of ownerReferences", dependents.OwnersAnnotation, dependents.OwnedLabel)
		// The links do not make anyone delete them while the owner lives:
		// teardown confirms the owner with a live GET. The sentinel is a
		// dependent of an owner that never existed, collected by the same
		// controller: once it is gone, the controller has seen our objects.
		sentinel := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "sriov-demo-sentinel"}}
		if err := dependents.AddLink(sentinel, dependents.OwnerLink{APIVersion: "sriovnetwork.openshift.io/v1", Kind: "SriovNetwork", Namespace: s.opNS, Name: "never-existed", UID: "00000000-0000-0000-0000-000000000000"}); err != nil {
			return Outcome{}, err
		}
		if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, sentinel, metav1.CreateOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("creating the sentinel: %w", err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, sentinel.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return Outcome{}, fmt.Errorf("waiting for teardown to collect the sentinel: %w", err)
		}
		kept, err := s.present(ctx, e)
		if err != nil {
			return Outcome{}, err
		}
		e.say("while the SriovNetwork exists, all are kept: %s", orNothing(kept))
		if err := s.deleteNetwork(ctx, e); err != nil {
			return Outcome{}, err
		}
		left, err := s.waitPresent(ctx, e, nil, time.Minute)
		if err != nil {
			return Outcome{}, err
		}
		e.say("kubectl delete sriovnetwork %s -n %s: teardown deleted its dependents; left behind: %s", s.name, s.opNS, orNothing(left))

		out := Outcome{Left: left}
		with := "nothing left behind"
		if len(left) > 0 {
			with = "LEFT " + strings.Join(left, ", ")
		}
		out.Summary = fmt.Sprintf("without teardown: WRONGLY DELETED %s, ORPHANED %s; with teardown: %s", orNothing(wrongly), orNothing(without), with)
		return out, nil
	},
}
