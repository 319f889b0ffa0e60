//go:build integration

package security

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// grant lets the ServiceAccount user act with rules in namespace ns (a
// Role and RoleBinding made by the admin).
func grant(t *testing.T, ns, name, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	saNS, saName, _ := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: saName}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// ownerConfigMap creates the owner ns/name, with a deletion policy if set.
func ownerConfigMap(t *testing.T, ns, name string, policy dependents.Policy) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if policy != "" {
		cm.Labels = map[string]string{dependents.PolicyLabel: string(policy)}
	}
	if err := admin.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	return cm
}

// linked returns a ConfigMap ns/name linked to owners.
func linked(t *testing.T, ns, name string, owners ...dependents.Object) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range owners {
		if err := dependents.SetOwner(cm, o); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

// waitGone waits until obj is gone.
func waitGone(t *testing.T, what string, obj client.Object) {
	t.Helper()
	eventually(t, time.Minute, what+" to be gone", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), nil
	})
}

// TestOwnerLinkSquattingIsRefused: a tenant who may only read gc/owner-x
// (policy Foreground) links its own objects to it: refused in
// kube-apiserver, on CREATE, on UPDATE and through a status subresource,
// with a message that names the link, the verb, the resource and the
// namespace. The owner then deletes normally.
func TestOwnerLinkSquattingIsRefused(t *testing.T) {
	ctx := t.Context()
	gc, evil := namespace(t, "gc"), namespace(t, "evil")
	owner := ownerConfigMap(t, gc, "owner-x", dependents.PolicyForeground)
	squatter := serviceAccount(t, evil, "squatter", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "persistentvolumeclaims"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims/status"}, Verbs: []string{"get", "update", "patch"}},
	})
	grant(t, gc, "read-owner", squatter.User, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"owner-x"}, Verbs: []string{"get"}},
	})
	link := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"owner-x","uid":%q}`, gc, owner.UID)
	want := []string{squatter.User + " may not update configmaps owner-x in namespace " + gc, "owner link " + link, "verb update"}

	err := squatter.Create(ctx, linked(t, evil, "squatter", owner))
	refused(t, "creating a dependent linked to an owner the creator may not update", err, want...)

	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: "plain"}}
	if err := squatter.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q}}}`, dependents.OwnedLabel, dependents.OwnersAnnotation, "["+link+"]")
	err = squatter.Patch(ctx, plain, client.RawPatch(types.MergePatchType, []byte(patch)))
	refused(t, "linking an existing object by a patch", err, want...)

	// A status write can change metadata too: the policy matches */*.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if err := squatter.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	err = squatter.Status().Patch(ctx, pvc, client.RawPatch(types.MergePatchType, []byte(patch)))
	refused(t, "linking through persistentvolumeclaims/status", err, want...)

	// The label without "true" is not a link the controller reads; the
	// annotation alone neither: a later "true" is checked then.
	half := fmt.Sprintf(`{"metadata":{"labels":{%q:"false"},"annotations":{%q:%q}}}`, dependents.OwnedLabel, dependents.OwnersAnnotation, "["+link+"]")
	if err := squatter.Patch(ctx, plain, client.RawPatch(types.MergePatchType, []byte(half))); err != nil {
		t.Fatalf("an annotation the controller does not read: %v", err)
	}
	err = squatter.Patch(ctx, plain, client.RawPatch(types.MergePatchType, []byte(patch)))
	refused(t, "turning an unread annotation into a link", err, want...)

	if err := admin.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the Foreground owner nobody could squat on", owner)
}

// TestOwnerLinkNeedsUpdateOnTheOwner: a writer with update on the owner
// may link to it, and the Foreground owner then waits for (and teardown
// deletes) its dependent; removing a link needs no right on the owner.
func TestOwnerLinkNeedsUpdateOnTheOwner(t *testing.T) {
	ctx := t.Context()
	gc, app := namespace(t, "gc"), namespace(t, "app")
	owner := ownerConfigMap(t, gc, "owner-y", dependents.PolicyForeground)
	other := ownerConfigMap(t, gc, "owner-z", "")
	writer := serviceAccount(t, app, "writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch"}},
	})
	grant(t, gc, "update-owner", writer.User, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"owner-y"}, Verbs: []string{"get", "update"}},
	})
	dep := linked(t, app, "dep", owner)
	if err := writer.Create(ctx, dep); err != nil {
		t.Fatalf("a writer who may update the owner links to it: %v", err)
	}

	// The admin links a second owner; the writer may remove that link
	// without any right on owner-z.
	if err := dependents.SetOwner(dep, other); err != nil {
		t.Fatal(err)
	}
	if err := admin.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if _, err := dependents.RemoveOwner(dep, other.UID); err != nil {
		t.Fatal(err)
	}
	if err := writer.Update(ctx, dep); err != nil {
		t.Fatalf("removing a link needs no right on its owner: %v", err)
	}
	// Adding it back does.
	if err := dependents.SetOwner(dep, other); err != nil {
		t.Fatal(err)
	}
	err := writer.Update(ctx, dep)
	refused(t, "adding a link to owner-z", err, writer.User+" may not update configmaps owner-z in namespace "+gc)

	if err := admin.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the dependent of the Foreground owner", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "dep"}})
	waitGone(t, "the Foreground owner", owner)
}

// TestOwnerLinksAreBounded: at most 32 links per object (all 32 may be
// added in one write), in the form pkg/dependents writes, each uid once;
// refused with a message saying which rule.
func TestOwnerLinksAreBounded(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "bounded")
	writer := serviceAccount(t, ns, "writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch"}},
	})
	var owners []dependents.Object
	for i := range 33 {
		owners = append(owners, ownerConfigMap(t, ns, fmt.Sprintf("o%d", i), ""))
	}
	var all []dependents.OwnerLink
	for _, o := range owners {
		l, err := dependents.LinkTo(o)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	withLinks := func(name string, links []dependents.OwnerLink) *corev1.ConfigMap {
		v, err := dependents.Format(links)
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{dependents.OwnedLabel: "true"}, Annotations: map[string]string{dependents.OwnersAnnotation: v}}}
	}

	refused(t, "33 links", writer.Create(ctx, withLinks("too-many", all)), "33 owner links; at most 32 are allowed per object")

	dep := withLinks("sixteen", all[:16])
	if err := writer.Create(ctx, dep); err != nil {
		t.Fatalf("16 links: %v", err)
	}
	v, _ := dependents.Format(all[:32])
	dep.Annotations[dependents.OwnersAnnotation] = v
	if err := writer.Update(ctx, dep); err != nil {
		t.Fatalf("16 more links, 32 in all: %v", err)
	}
	if err := writer.Create(ctx, withLinks("thirty-two", all[:32])); err != nil {
		t.Fatalf("32 links in one write: %v", err)
	}

	for what, raw := range map[string]string{
		"a space":         strings.Replace(v[:strings.Index(v, "},")+1]+"]", `","kind"`, `", "kind"`, 1),
		"keys reordered":  fmt.Sprintf(`[{"kind":"ConfigMap","apiVersion":"v1","namespace":%q,"name":"o0","uid":%q}]`, ns, all[0].UID),
		"a duplicate key": fmt.Sprintf(`[{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"o0","name":"o1","uid":%q}]`, ns, all[0].UID),
		"an escape":       fmt.Sprintf(`[{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"o\u0030","uid":%q}]`, ns, all[0].UID),
		"not JSON":        "poison",
	} {
		cm := withLinks("form", nil)
		cm.Annotations[dependents.OwnersAnnotation] = raw
		refused(t, "a value with "+what, writer.Create(ctx, cm), "must be in the form pkg/dependents writes")
	}
	twice := fmt.Sprintf(`[{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"o0","uid":%q},{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"o1","uid":%q}]`, ns, all[0].UID, ns, all[0].UID)
	cm := withLinks("twice", nil)
	cm.Annotations[dependents.OwnersAnnotation] = twice
	refused(t, "a uid twice", writer.Create(ctx, cm), "lists a uid twice")
}

// TestEveryAddedLinkIsChecked: a link the writer may not make, hidden at
// index 19 among 20 (past the first policy's 16 checks), is refused by
// name.
func TestEveryAddedLinkIsChecked(t *testing.T) {
	ctx := t.Context()
	gc, app := namespace(t, "gc"), namespace(t, "app")
	writer := serviceAccount(t, app, "writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch"}},
	})
	var mayUpdate []string
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "dep"}}
	for i := range 20 {
		o := ownerConfigMap(t, gc, fmt.Sprintf("o%d", i), "")
		if i < 19 {
			mayUpdate = append(mayUpdate, o.Name)
		}
		if err := dependents.SetOwner(dep, o); err != nil {
			t.Fatal(err)
		}
	}
	grant(t, gc, "update-owners", writer.User, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: mayUpdate, Verbs: []string{"update"}},
	})
	refused(t, "20 links, the last one not the writer's to make", writer.Create(ctx, dep),
		writer.User+" may not update configmaps o19 in namespace "+gc)
	ls, err := dependents.Owners(dep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dependents.RemoveOwner(dep, ls[19].UID); err != nil {
		t.Fatal(err)
	}
	if err := writer.Create(ctx, dep); err != nil {
		t.Fatalf("the 19 links the writer may make: %v", err)
	}
}

// TestALinkInTheWrongScopeHoldsNoOwner: a tenant with the cluster-admin
// ClusterRole bound in its own namespace (Kubernetes' "full control of a
// namespace") links a ConfigMap of its namespace to another tenant's
// Namespace, giving the link its own namespace: {kind: Namespace,
// namespace: evil, name: victim, uid: victim's uid}. teardown-owner-links
// checked the right in the linker's namespace, where it may do anything,
// and let it through; it now refuses it (TestWrongScopeIsRefusedAtAdmission
// for every kind). The controller must not rely on that (a link written
// before the policy, or of a CRD's cluster-scoped kind, which CEL cannot
// know): the cluster admin writes the link, and the tenant's Lien keeps
// the ConfigMap. The dependent side calls the link invalid, and the owner
// side must too: the victim Namespace, policy Foreground, does not wait
// for the ConfigMap, and its deletion ends.
// Dependents were indexed by the owner's UID alone, so the victim was held
// and stayed Terminating, waiting for a dependent the tenant's lien kept.
func TestALinkInTheWrongScopeHoldsNoOwner(t *testing.T) {
	ctx := t.Context()
	victim, evil := namespace(t, "victim"), namespace(t, "evil")
	tenant := serviceAccount(t, evil, "tenant", nil, "cluster-admin")
	ns := &corev1.Namespace{}
	if err := admin.Get(ctx, client.ObjectKey{Name: victim}, ns); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, dependents.PolicyLabel, dependents.PolicyForeground)
	if err := admin.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`[{"apiVersion":"v1","kind":"Namespace","namespace":%q,"name":%q,"uid":%q}]`, evil, victim, ns.UID)
	hook := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: evil, Name: "hook",
		Labels:      map[string]string{dependents.OwnedLabel: "true"},
		Annotations: map[string]string{dependents.OwnersAnnotation: link},
	}}
	refused(t, "the tenant's link to a Namespace with a namespace", tenant.Create(ctx, hook.DeepCopy(), client.DryRunAll),
		"kind Namespace is cluster-scoped: remove namespace from the link")
	// The cluster admin is trusted (a controller user of the test's Trust):
	// the link is written as if before the policy refused it.
	if err := admin.Create(ctx, hook); err != nil {
		t.Fatalf("the cluster admin creating the dependent: %v", err)
	}
	keep := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: "keep-hook"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "hook"}},
			Reason:  "to hold the victim",
		},
	}
	if err := tenant.Create(ctx, keep); err != nil {
		t.Fatal(err)
	}
	lienCondition(t, keep, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	eventually(t, time.Minute, "the dependent side to call the link invalid", func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := admin.List(ctx, &events, client.InNamespace(evil)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "hook" && e.Reason == "InvalidOwner" && strings.Contains(e.Message, `kind Namespace is cluster-scoped but the link has namespace "`+evil+`"`) {
				return true, nil
			}
		}
		return false, nil
	})
	// A Foreground owner is held for its own sake: its deletion waits for
	// its dependents, of which the tenant's ConfigMap must not be one.
	eventually(t, time.Minute, "the victim Namespace to be held (policy Foreground)", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Name: victim}, ns)
		return err == nil && slices.Contains(ns.Finalizers, dependents.Finalizer), err
	})
	if err := admin.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the victim Namespace", ns)
}
