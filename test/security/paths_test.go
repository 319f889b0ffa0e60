//go:build integration

package security

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// statusRights are the status-writer's: every status subresource of its
// namespace, nothing else.
var statusRights = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*/status"}, Verbs: []string{"get", "update", "patch"}}}

// underLien protects objs (all of one namespace) with a Lien of the given
// mode, held until it is deleted, and waits until the controller marked
// each of them. It returns the lien's name as the markers name it.
func underLien(t *testing.T, mode v1alpha1.LienMode, objs ...client.Object) string {
	t.Helper()
	ctx := t.Context()
	ns := objs[0].GetNamespace()
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(string(mode)) + "-" + objs[0].GetName()},
		Spec:       v1alpha1.LienSpec{Mode: mode, Reason: "the security suite needs it"},
	}
	for _, o := range objs {
		gvk, err := admin.GroupVersionKindFor(o)
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.Protect = append(l.Spec.Protect, v1alpha1.LienTarget{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: o.GetName()})
	}
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	want := lien.LabelDeny
	if mode == v1alpha1.LienModeDefer {
		want = lien.LabelDefer
	}
	for _, o := range objs {
		eventually(t, time.Minute, fmt.Sprintf("%s to be marked by lien %s", o.GetName(), l.Name), func(ctx context.Context) (bool, error) {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false, err
			}
			return o.GetLabels()[lien.Label] == want, nil
		})
	}
	return ns + "/" + l.Name
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// stillMarked fails the test unless obj still carries the lien label
// want and an annotation naming lienName.
func stillMarked(t *testing.T, obj client.Object, want, lienName string) {
	t.Helper()
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("%s: %v", obj.GetName(), err)
	}
	if got := obj.GetLabels()[lien.Label]; got != want {
		t.Errorf("%s: label %s = %q, want %q", obj.GetName(), lien.Label, got, want)
	}
	if got := obj.GetAnnotations()[lien.Annotation]; !strings.Contains(got, lienName) {
		t.Errorf("%s: annotation %s = %q, want it to name %s", obj.GetName(), lien.Annotation, got, lienName)
	}
}

func pvc(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			},
		},
	}
}

func pod(ns, name string) *corev1.Pod {
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
}

// defaultServiceAccount waits for the namespace's default ServiceAccount,
// without which kube-apiserver refuses pods.
func defaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	eventually(t, 30*time.Second, "the default service account in "+ns, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// TestStatusSubresourceCannotStripTheMarkers: a PVC under a Deny lien.
// Through persistentvolumeclaims/status, the status-writer strips the
// label, and strips it while writing a malformed annotation; both are
// refused by the tamper policy, whose message names the subresource, with
// the controller running and with it down, while a status write that
// leaves the markers alone is accepted. The editor, who has no status
// rights, is refused by RBAC; through the main resource, by the policy.
func TestStatusSubresourceCannotStripTheMarkers(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "status")
	writer := serviceAccount(t, ns, "status-writer", statusRights)
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	data := pvc(ns, "data")
	create(t, data)
	lienName := underLien(t, v1alpha1.LienModeDeny, data)

	strip := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"teardown.dev/lien":null}}}`))
	poison := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"teardown.dev/lien":null},"annotations":{"teardown.dev/liens":"poison"}}}`))
	try := func() {
		t.Helper()
		for name, patch := range map[string]client.Patch{"stripping the label": strip, "stripping the label and poisoning the annotation": poison} {
			err := writer.Status().Patch(ctx, pvc(ns, "data"), patch)
			refused(t, "status-writer "+name+" through persistentvolumeclaims/status", err,
				"the lien markers on persistentvolumeclaims/status "+ns+"/data", "are managed by teardown", lienName)
		}
		if err := writer.Status().Patch(ctx, pvc(ns, "data"), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Pending"}}`))); err != nil {
			t.Errorf("status-writer writing the status, markers untouched: %v, want accepted", err)
		}
		if err := editor.Status().Patch(ctx, pvc(ns, "data"), strip); !apierrors.IsForbidden(err) {
			t.Errorf("editor stripping the label through persistentvolumeclaims/status: %v, want Forbidden", err)
		}
		refused(t, "editor stripping the label", editor.Patch(ctx, pvc(ns, "data"), strip),
			"the lien markers on persistentvolumeclaims "+ns+"/data", "are managed by teardown")
		refused(t, "editor deleting the pvc", editor.Delete(ctx, pvc(ns, "data")), "protected by teardown lien(s)", lienName)
		stillMarked(t, data, lien.LabelDeny, lienName)
	}
	try()
	withControllersDown(t, try)
}

// TestDeferFinalizerCannotBeRemovedThroughStatus: a Deployment under a
// Defer lien is deleted (accepted, its finalizer keeps it); removing the
// finalizers through deployments/status is refused, with the controller
// running and with it down, and the Deployment stays.
func TestDeferFinalizerCannotBeRemovedThroughStatus(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "finalizer")
	writer := serviceAccount(t, ns, "status-writer", statusRights)
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	op := deployment(ns, "op")
	create(t, op)
	lienName := underLien(t, v1alpha1.LienModeDefer, op)
	if err := editor.Delete(ctx, deployment(ns, "op")); err != nil {
		t.Fatalf("editor deleting a Defer-protected deployment: %v, want accepted", err)
	}
	remove := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
	try := func() {
		t.Helper()
		refused(t, "status-writer removing the finalizers through deployments/status", writer.Status().Patch(ctx, deployment(ns, "op"), remove),
			"the lien markers on deployments/status "+ns+"/op", "are managed by teardown", lienName)
		refused(t, "editor removing the finalizers", editor.Patch(ctx, deployment(ns, "op"), remove),
			"the lien markers on deployments "+ns+"/op", "are managed by teardown")
		if err := admin.Get(ctx, client.ObjectKeyFromObject(op), op); err != nil {
			t.Fatalf("the Defer-protected deployment: %v, want it kept by its finalizer", err)
		}
		if op.DeletionTimestamp == nil || !slices.Contains(op.Finalizers, lien.Finalizer) {
			t.Errorf("deployment: deletionTimestamp %v, finalizers %v; want deleting, kept by %s", op.DeletionTimestamp, op.Finalizers, lien.Finalizer)
		}
	}
	try()
	withControllersDown(t, try)
}

// TestScaleOfAProtectedDeploymentStillWorks: deployments/scale's body is a
// Scale, without the Deployment's labels, so the tamper policy never sees
// it: the editor scales a Deny-protected Deployment, and it keeps its
// markers.
func TestScaleOfAProtectedDeploymentStillWorks(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "scale")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	web := deployment(ns, "web")
	create(t, web)
	lienName := underLien(t, v1alpha1.LienModeDeny, web)
	scale := &autoscalingv1.Scale{}
	if err := editor.SubResource("scale").Get(ctx, deployment(ns, "web"), scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 3
	if err := editor.SubResource("scale").Update(ctx, deployment(ns, "web"), client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("editor scaling a protected deployment: %v, want accepted", err)
	}
	stillMarked(t, web, lien.LabelDeny, lienName)
	if web.Spec.Replicas == nil || *web.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", web.Spec.Replicas)
	}
}

// TestMarkersCannotBeForgedAtCreate: the editor creates a Service carrying
// the lien label and an entry of a lien that never existed, with each
// label value, and adds the label to an object of its own by UPDATE: all
// refused, with the controller running and with it down. The same objects
// without the markers are created.
func TestMarkersCannotBeForgedAtCreate(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "forged")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	forged := `[{"lien":"` + ns + `/never-existed","reason":"forged"}]`
	svc := func(name, label string) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{lien.Annotation: forged}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if label != "" {
			s.Labels = map[string]string{lien.Label: label}
		}
		return s
	}
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}
	if err := editor.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	try := func(round string) {
		t.Helper()
		for _, value := range []string{lien.LabelDeny, lien.LabelDefer, "no"} {
			name := round + "-" + value
			refused(t, fmt.Sprintf("editor creating a service with %s=%q", lien.Label, value), editor.Create(ctx, svc(name, value)),
				"creating services "+ns+"/"+name+" with the label teardown.dev/lien is refused", "managed by teardown", "protect it with a Lien")
		}
		label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"teardown.dev/lien":"true"},"annotations":{"teardown.dev/liens":`+fmt.Sprintf("%q", forged)+`}}}`))
		refused(t, "editor adding the lien label to its own configmap", editor.Patch(ctx, mine.DeepCopy(), label),
			"the lien markers on configmaps "+ns+"/mine", "are managed by teardown")
		// Without the label, the annotation alone protects nothing and the
		// policy never sees the object (the controller repairs it).
		if err := editor.Create(ctx, svc(round+"-plain", "")); err != nil {
			t.Errorf("editor creating a service without the lien label: %v, want accepted", err)
		}
	}
	try("up")
	withControllersDown(t, func() { try("down") })
}

// TestBindingCannotRelabelAPod: kube-apiserver copies a Binding's labels
// onto the pod it binds. A Binding carrying the lien label, which would
// overwrite a Deny-protected pod's, is refused; the same Binding without
// it binds the pod, whose markers stay.
func TestBindingCannotRelabelAPod(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "binding")
	defaultServiceAccount(t, ns)
	binder := serviceAccount(t, ns, "binder", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/binding"}, Verbs: []string{"create"}}})
	p := pod(ns, "p")
	create(t, p)
	lienName := underLien(t, v1alpha1.LienModeDeny, p)
	binding := func(labels map[string]string) *corev1.Binding {
		return &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	}
	err := binder.SubResource("binding").Create(ctx, pod(ns, "p"), binding(map[string]string{lien.Label: "no"}))
	refused(t, "a binding relabelling the pod", err, "creating pods/binding "+ns+"/p with the label teardown.dev/lien is refused")
	if err := binder.SubResource("binding").Create(ctx, pod(ns, "p"), binding(map[string]string{"zone": "a"})); err != nil {
		t.Fatalf("a binding without the lien label: %v, want accepted", err)
	}
	stillMarked(t, p, lien.LabelDeny, lienName)
	if p.Spec.NodeName != "node-1" || p.Labels["zone"] != "a" {
		t.Errorf("pod: node %q, labels %v; want bound to node-1 with zone=a", p.Spec.NodeName, p.Labels)
	}
}

// entries is an annotation teardown.dev/liens of n entries.
func entries(ns string, n int) string {
	var es []string
	for i := range n {
		es = append(es, fmt.Sprintf(`{"lien":"%s/l%d","reason":"r"}`, ns, i))
	}
	return "[" + strings.Join(es, ",") + "]"
}

// TestAtMost32LiensPerObject: the tamper policy refuses, even to the
// trusted controller user, an annotation teardown.dev/liens of more than
// 32 entries, at CREATE and at UPDATE; 32 are accepted, and a write that
// lowers the count is too. Inside kube-apiserver: the controller is down,
// so that nothing but the requests below writes the object.
func TestAtMost32LiensPerObject(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "many")
	cm := func(name string, n int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{lien.Label: lien.LabelDeny}, Annotations: map[string]string{lien.Annotation: entries(ns, n)}}}
	}
	const msg = "would hold 33 liens: at most 32 liens may protect one object"
	refused(t, "the controller creating an object with 33 liens", admin.Create(ctx, cm("thirty-three", 33)), "configmaps "+ns+"/thirty-three", msg)
	withControllersDown(t, func() {
		refused(t, "the controller creating an object with 33 liens", admin.Create(ctx, cm("thirty-three", 33)), msg)
		full := cm("full", 32)
		if err := admin.Create(ctx, full); err != nil {
			t.Fatalf("the controller creating an object with 32 liens: %v, want accepted", err)
		}
		set := func(n int) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, lien.Annotation, entries(ns, n))
			return admin.Patch(ctx, full.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		refused(t, "the controller writing a 33rd lien", set(33), "configmaps "+ns+"/full", msg)
		if err := set(31); err != nil {
			t.Errorf("the controller taking a lien off: %v, want accepted", err)
		}
		unmark := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"teardown.dev/lien":null},"annotations":{"teardown.dev/liens":null}}}`))
		if err := admin.Patch(ctx, full.DeepCopy(), unmark); err != nil {
			t.Errorf("unmarking: %v", err)
		}
	})
}

// TestEvictionOfADenyProtectedPodIsRefused: the eviction of a pod under a
// Deny lien is refused, naming the lien, with the controller running and
// with it down; the eviction of an unprotected pod of the same namespace
// is accepted (the pod goes), and that of a pod under a Defer lien too,
// while its finalizer keeps it.
func TestEvictionOfADenyProtectedPodIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "evict")
	defaultServiceAccount(t, ns)
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	p1, p2, free, deferred := pod(ns, "p1"), pod(ns, "p2"), pod(ns, "free"), pod(ns, "deferred")
	create(t, p1, p2, free, deferred)
	denyLien := underLien(t, v1alpha1.LienModeDeny, p1, p2)
	deferLien := underLien(t, v1alpha1.LienModeDefer, deferred)
	evict := func(name string, dryRun ...string) error {
		return editor.SubResource("eviction").Create(ctx, pod(ns, name), &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: name},
			DeleteOptions: &metav1.DeleteOptions{DryRun: dryRun},
		})
	}
	// kube-apiserver learns of the protected pods from its own watch: wait
	// until it has seen the label (a dry-run eviction is refused).
	eventually(t, 30*time.Second, "kube-apiserver to refuse the dry-run eviction of p2", func(ctx context.Context) (bool, error) {
		return evict("p2", metav1.DryRunAll) != nil, nil
	})
	try := func() {
		t.Helper()
		for _, name := range []string{"p1", "p2"} {
			refused(t, "editor evicting "+name, evict(name), "eviction of pod "+ns+"/"+name+" is refused: it is protected by teardown lien(s)", denyLien)
			stillMarked(t, pod(ns, name), lien.LabelDeny, denyLien)
		}
	}
	try()
	withControllersDown(t, try)

	if err := evict("free"); err != nil {
		t.Fatalf("editor evicting an unprotected pod: %v, want accepted", err)
	}
	eventually(t, 30*time.Second, "the evicted unprotected pod to be gone", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(free), &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := evict("deferred"); err != nil {
		t.Fatalf("editor evicting a Defer-protected pod: %v, want accepted", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(deferred), deferred); err != nil {
		t.Fatalf("the evicted Defer-protected pod: %v, want kept by its finalizer", err)
	}
	if deferred.DeletionTimestamp == nil || !slices.Contains(deferred.Finalizers, lien.Finalizer) {
		t.Errorf("Defer-protected pod: deletionTimestamp %v, finalizers %v; want deleting, kept by %s", deferred.DeletionTimestamp, deferred.Finalizers, lien.Finalizer)
	}
	stillMarked(t, deferred, lien.LabelDefer, deferLien)
}

// TestDeleteCollectionSparesProtectedObjects: the editor deletes every
// ConfigMap of a set, one of which is under a Deny lien. kube-apiserver
// runs DELETE admission per object: the protected one is refused (the
// request fails with the lien's message) and stays; those listed before it
// are deleted; its single delete-collection worker stops at the refusal,
// so those listed after it are left for a later request.
func TestDeleteCollectionSparesProtectedObjects(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "collection")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	set := map[string]string{"set": "x"}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"set": "x"}}}
	}
	before, kept, after := cm("a-free"), cm("m-kept"), cm("z-free")
	create(t, before, kept, after)
	lienName := underLien(t, v1alpha1.LienModeDeny, kept)
	err := editor.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels(set))
	refused(t, "editor deleting the collection", err, "deletion of configmaps "+ns+"/m-kept is refused", lienName)
	stillMarked(t, kept, lien.LabelDeny, lienName)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(before), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a-free, listed before the protected one: %v, want deleted", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(after), &corev1.ConfigMap{}); err != nil {
		t.Errorf("z-free, listed after the protected one: %v, want left (the request stopped at the refusal)", err)
	}
}

// TestServerSideApplyCannotRemoveTheLabel: the editor force-applies a
// protected ConfigMap with another label value, and, having first made
// itself the label's only manager (managedFields are writable), applies it
// without the label, which would remove it: both refused.
func TestServerSideApplyCannotRemoveTheLabel(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "apply")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v"}}
	create(t, cm)
	lienName := underLien(t, v1alpha1.LienModeDeny, cm)
	apply := func(labels map[string]string) error {
		ac := corev1ac.ConfigMap("cfg", ns).WithData(map[string]string{"k": "v2"})
		if labels != nil {
			ac = ac.WithLabels(labels)
		}
		return editor.Apply(ctx, ac, client.FieldOwner("editor"), client.ForceOwnership)
	}
	refused(t, "editor force-applying another label value", apply(map[string]string{lien.Label: "false"}),
		"the lien markers on configmaps "+ns+"/cfg", "are managed by teardown")

	own := `[{"op":"replace","path":"/metadata/managedFields","value":[{"manager":"editor","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:data":{"f:k":{}},"f:metadata":{"f:labels":{"f:teardown.dev/lien":{}}}}}]}]`
	if err := editor.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(own))); err != nil {
		t.Fatalf("editor rewriting managedFields: %v", err)
	}
	refused(t, "editor applying without the label it alone manages", apply(nil),
		"the lien markers on configmaps "+ns+"/cfg", "are managed by teardown")
	stillMarked(t, cm, lien.LabelDeny, lienName)
}

// TestDryRunDeleteIsRefused: a dry-run DELETE of a Deny-protected object
// is refused as a real one is, with the controller running and with it
// down: dry-run cannot be used to probe past the policy, nor mistaken for
// "it would go".
func TestDryRunDeleteIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "dryrun")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}}
	create(t, cm)
	lienName := underLien(t, v1alpha1.LienModeDeny, cm)
	try := func() {
		t.Helper()
		refused(t, "editor's dry-run delete", editor.Delete(ctx, cm.DeepCopy(), client.DryRunAll), "deletion of configmaps "+ns+"/cfg is refused", lienName)
		stillMarked(t, cm, lien.LabelDeny, lienName)
	}
	try()
	withControllersDown(t, try)
}

// TestImpersonatingTheControllerIsRefused: with its own token, the editor
// asks to act as teardown's controller, or as a member of the break-glass
// group, to strip a protected object's label; kube-apiserver refuses the
// impersonation itself (edit grants no impersonate).
func TestImpersonatingTheControllerIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "impersonate")
	serviceAccount(t, ns, "editor", nil, "edit")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}}
	create(t, cm)
	lienName := underLien(t, v1alpha1.LienModeDeny, cm)

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "editor", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, as := range []rest.ImpersonationConfig{
		{UserName: install.ControllerUser},
		{UserName: "system:serviceaccount:" + ns + ":editor", Groups: []string{"teardown.dev:break-glass"}},
	} {
		c := rest.AnonymousClientConfig(cfg)
		c.BearerToken = tok.Status.Token
		c.Impersonate = as
		// The admin's mapper: this identity's discovery is refused too.
		editor, err := client.New(c, client.Options{Scheme: scheme, Mapper: admin.RESTMapper()})
		if err != nil {
			t.Fatal(err)
		}
		err = editor.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"teardown.dev/lien":null}}}`)))
		refused(t, fmt.Sprintf("editor impersonating %+v", as), err, "cannot impersonate")
	}
	stillMarked(t, cm, lien.LabelDeny, lienName)
}

// TestPolicyParametersAreOutsideTheEditorsReach: who is trusted comes from
// the cluster-scoped Trust teardown; the editor of an application
// namespace can neither change it nor read it.
func TestPolicyParametersAreOutsideTheEditorsReach(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "params")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	params := &v1alpha1.Trust{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.TrustName}}
	patch := fmt.Sprintf(`{"spec":{"controllerUsers":["system:serviceaccount:%s:editor"]}}`, ns)
	if err := editor.Patch(ctx, params, client.RawPatch(types.MergePatchType, []byte(patch))); !apierrors.IsForbidden(err) {
		t.Errorf("editor changing Trust teardown: %v, want Forbidden", err)
	}
	if err := editor.Get(ctx, client.ObjectKeyFromObject(params), params); !apierrors.IsForbidden(err) {
		t.Errorf("editor reading Trust teardown: %v, want Forbidden", err)
	}
}

// TestEvictionPolicySeesNewPodsAfterReinstall: the eviction policy reads
// its params from kube-apiserver's Pod informer. Once the policies were
// removed (kube-apiserver accepts the eviction of a protected pod) and
// installed again, a pod protected since is found and its eviction
// refused: the Pod informer is kube-apiserver's own (PodSecurity admission
// and the service-account token authenticator use it) and outlives the
// policy. (The tamper policy's ConfigMap informer does not:
// docs/security.md, "Where Kubernetes gives no hook".)
func TestEvictionPolicySeesNewPodsAfterReinstall(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "reinstall")
	defaultServiceAccount(t, ns)
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	evict := func(name string) error {
		return editor.SubResource("eviction").Create(ctx, pod(ns, name), &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: name},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
	}
	before := pod(ns, "before")
	create(t, before)
	underLien(t, v1alpha1.LienModeDeny, before)
	eventually(t, 30*time.Second, "the dry-run eviction of a protected pod to be refused", func(ctx context.Context) (bool, error) {
		return evict("before") != nil, nil
	})
	if err := install.Uninstall(ctx, cfg, install.UninstallOptions{PoliciesOnly: true}, io.Discard); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "kube-apiserver to drop the eviction policy (the protected pod's dry-run eviction accepted)", func(ctx context.Context) (bool, error) {
		return evict("before") == nil, nil
	})
	if err := install.Apply(ctx, cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		t.Fatal(err)
	}
	since := pod(ns, "since")
	create(t, since)
	lienName := underLien(t, v1alpha1.LienModeDeny, since)
	eventually(t, 30*time.Second, "the eviction of a pod protected since the reinstall to be refused", func(ctx context.Context) (bool, error) {
		return evict("since") != nil, nil
	})
	refused(t, "editor evicting the pod protected since", evict("since"), "eviction of pod "+ns+"/since is refused", lienName)
}

// TestTrustChangesAreSeenAfterReinstall: the policies read the Trust, a
// kind of teardown's own, for which kube-apiserver starts a new informer
// each time a policy reading it is installed (a ConfigMap's informer, once
// stopped by an uninstall, was never started again: kube-apiserver kept the
// old parameters until it restarted). A user trusted by a reinstall may
// write the lien markers at once, and no longer once the Trust drops them.
func TestTrustChangesAreSeenAfterReinstall(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "trust")
	operator := serviceAccount(t, ns, "operator", nil, "edit")
	user := "system:serviceaccount:" + ns + ":operator"
	marked := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marked", Labels: map[string]string{lien.Label: lien.LabelDeny}}}
		return operator.Create(ctx, cm, client.DryRunAll)
	}
	refused(t, "an untrusted user creating a lien-labelled ConfigMap", marked(), "with the label teardown.dev/lien is refused")
	if err := install.Uninstall(ctx, cfg, install.UninstallOptions{PoliciesOnly: true}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(ctx, cfg, install.Options{ControllerUsers: []string{"teardown:admin", user}}, io.Discard); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the user the reinstall trusts to create a lien-labelled ConfigMap", func(ctx context.Context) (bool, error) {
		return marked() == nil, nil
	})
	if err := install.Apply(ctx, cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the user the Trust no longer names to be refused", func(ctx context.Context) (bool, error) {
		return marked() != nil, nil
	})
	refused(t, "a user no longer trusted creating a lien-labelled ConfigMap", marked(), "with the label teardown.dev/lien is refused")
}
