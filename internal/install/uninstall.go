package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// UninstallProbe is the lien-labelled ConfigMap Uninstall creates, in
// UninstallOptions.Namespace, to see that kube-apiserver no longer enforces
// the lien policy; it is deleted again before Uninstall returns.
const UninstallProbe = lien.UninstallProbe

// goneTimeout bounds the wait for each deleted object to be gone.
const goneTimeout = 2 * time.Minute

// UninstallOptions change what Uninstall deletes.
type UninstallOptions struct {
	// PoliciesOnly deletes the lien policies and their bindings, nothing
	// else: what the Helm chart's pre-delete hook runs.
	PoliciesOnly bool
	// CRDs also deletes the CRDs. It is refused while a Lien, ClusterLien or
	// Teardown exists: their finalizers need the controller, which is
	// deleted first, so they and their CRDs would stay Terminating.
	CRDs bool
	// DryRun sends every DELETE as a server-side dry run: nothing changes.
	DryRun bool
	// Namespace holds UninstallProbe; empty is Namespace (teardown-system).
	// The chart's hook passes its release namespace.
	Namespace string
}

// Uninstall deletes what Apply applied, in an order that never leaves an
// object undeletable: first the lien policy bindings and policies, waiting
// until they are gone and kube-apiserver lets a lien-labelled object be
// deleted; then the controller, RBAC, the policy parameters and the
// namespace, in reverse apply order, waiting until each is gone; then the
// owners teardown held lose its finalizer (releaseOwners). CRDs (and
// so every Lien, ClusterLien and Teardown) are kept unless opts.CRDs.
// Objects already gone are fine: Uninstall is idempotent. Progress lines go
// to out.
func Uninstall(ctx context.Context, cfg *rest.Config, opts UninstallOptions, out io.Writer) error {
	// Any image and any grant: they only add the controller's objects and
	// GrantsRole to those to delete.
	objs, err := Objects(Options{ControllerImage: "uninstall", Grants: Grants{Patch: []string{"uninstall"}}})
	if err != nil {
		return err
	}
	var policies, others, crds []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding":
			policies = append([]*unstructured.Unstructured{u}, policies...)
		case "ValidatingAdmissionPolicy", "MutatingAdmissionPolicy":
			policies = append(policies, u)
		case "CustomResourceDefinition":
			crds = append(crds, u)
		default:
			others = append(others, u)
		}
	}
	slices.Reverse(others)
	slices.Reverse(crds)

	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	if opts.CRDs && !opts.PoliciesOnly {
		if err := refuseWhileCustomResources(ctx, c.dyn, crds); err != nil {
			return err
		}
	}
	d := &deleter{clients: c, dryRun: opts.DryRun, out: out}
	deleted, err := d.deleteAll(ctx, policies)
	if err != nil {
		return err
	}
	switch {
	case opts.DryRun:
	case deleted == 0:
		fmt.Fprintln(out, "lien policies already absent")
	default:
		ns := opts.Namespace
		if ns == "" {
			ns = Namespace
		}
		if err := waitNotEnforced(ctx, cfg, ns); err != nil {
			return err
		}
		fmt.Fprintln(out, "lien policies no longer enforced: lien-labelled objects are deletable")
	}
	if opts.PoliciesOnly {
		return nil
	}
	if opts.CRDs {
		others = append(others, crds...)
	}
	if _, err := d.deleteAll(ctx, others); err != nil {
		return err
	}
	// The controller is gone: the owners it held would stay undeletable.
	if err := releaseOwners(ctx, cfg, opts.DryRun, out); err != nil {
		return err
	}
	if opts.CRDs {
		// No Teardown is left (refuseWhileCustomResources): the namespaces
		// marked as waiting for one are marked for nothing.
		if err := unmarkNamespaces(ctx, cfg, opts.DryRun, out); err != nil {
			return err
		}
	}
	if !opts.CRDs {
		for _, u := range crds {
			fmt.Fprintf(out, "kept %s (--crds deletes it)\n", ref(u))
		}
	}
	return nil
}

type clients struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newClients(cfg *rest.Config) (clients, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	return clients{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// resource is the client for u's kind, in u's namespace if it has one.
func (c clients) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	ri := c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return ri.Namespace(u.GetNamespace()), nil
	}
	return ri, nil
}

func ref(u *unstructured.Unstructured) string {
	return strings.ToLower(u.GetKind()) + "/" + u.GetName()
}

type deleter struct {
	clients
	dryRun bool
	out    io.Writer
}

// deleteAll deletes the objects in order, each gone before the next, and
// returns how many existed.
func (d *deleter) deleteAll(ctx context.Context, objs []*unstructured.Unstructured) (int, error) {
	n := 0
	for _, u := range objs {
		existed, err := d.delete(ctx, u)
		if err != nil {
			return n, err
		}
		if existed {
			n++
		}
	}
	return n, nil
}

// delete deletes the object with the UID it has now and waits until that
// object is gone (another one of the same name counts as gone).
func (d *deleter) delete(ctx context.Context, u *unstructured.Unstructured) (bool, error) {
	target, err := d.resource(u)
	if meta.IsNoMatchError(err) {
		fmt.Fprintf(d.out, "absent %s\n", ref(u))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The DELETE carries the UID and resourceVersion just read: an object
	// changed since is read again, one replaced or gone is left alone.
	var uid types.UID
	for attempt := 0; ; attempt++ {
		live, err := target.Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && uid != "" && live.GetUID() != uid {
			fmt.Fprintf(d.out, "absent %s\n", ref(u))
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", ref(u), err)
		}
		uid = live.GetUID()
		rv := live.GetResourceVersion()
		del := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
		if d.dryRun {
			del.DryRun = []string{metav1.DryRunAll}
		}
		err = target.Delete(ctx, u.GetName(), del)
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(d.out, "absent %s\n", ref(u))
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("deleting %s: %w", ref(u), err)
		}
		break
	}
	if d.dryRun {
		fmt.Fprintf(d.out, "would delete %s\n", ref(u))
		return true, nil
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, goneTimeout, true, func(ctx context.Context) (bool, error) {
		live, err := target.Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && live.GetUID() != uid, nil
	})
	if err != nil {
		return true, fmt.Errorf("waiting for %s to be gone (see its finalizers and status): %w", ref(u), err)
	}
	fmt.Fprintf(d.out, "deleted %s\n", ref(u))
	return true, nil
}

// refuseWhileCustomResources fails, before anything is deleted, if an
// object of one of the CRDs exists.
func refuseWhileCustomResources(ctx context.Context, dyn dynamic.Interface, crds []*unstructured.Unstructured) error {
	var found []string
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		if plural == "trusts" {
			continue // install's own parameters, deleted with the others
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if len(versions) == 0 {
			continue
		}
		version, _ := versions[0].(map[string]any)["name"].(string)
		list, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{Limit: 5})
		if apierrors.IsNotFound(err) {
			continue // the CRD is not installed
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", plural, err)
		}
		for _, item := range list.Items {
			found = append(found, plural+"/"+strings.TrimPrefix(item.GetNamespace()+"/"+item.GetName(), "/"))
		}
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("--crds refused, nothing deleted: %s still exist(s), and their finalizers need the controller this deletes first; "+
		"delete them while the controller runs (it takes the lien markers off what they protect), then run again", strings.Join(found, ", "))
}

// probe is a lien-labelled ConfigMap whose DELETE the lien policy refuses
// while kube-apiserver enforces it.
func probe(om metav1.ObjectMeta, lienName, reason string) *corev1.ConfigMap {
	om.Labels = map[string]string{lien.Label: lien.LabelDeny}
	om.Annotations = map[string]string{lien.Annotation: `[{"lien":"` + lienName + `","reason":"` + reason + `"}]`}
	return &corev1.ConfigMap{ObjectMeta: om}
}

// probeDelete polls the dry-run DELETE of the probe (created: its name and
// its markers) until the lien policy refuses it (wantRefused: kube-apiserver
// enforces teardown-lien-deny) or lets it through (it no longer does). Each
// DELETE carries the UID and resourceVersion of a read that found the probe
// marked, so that its answer is about a lien-labelled object: a DELETE
// allowed because the marker was gone would say nothing. A probe found
// without its markers (a lien controller older than lien.IsProbe takes
// them off as a stray) is marked again through marker, and a DELETE that
// finds the probe changed since the read is sent again.
func probeDelete(ctx context.Context, cms, marker corev1client.ConfigMapInterface, created *corev1.ConfigMap, wantRefused bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := cms.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if cur.Labels[lien.Label] != created.Labels[lien.Label] || cur.Annotations[lien.Annotation] != created.Annotations[lien.Annotation] {
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Labels[lien.Label], cur.Annotations[lien.Annotation] = created.Labels[lien.Label], created.Annotations[lien.Annotation]
			if cur, err = marker.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return false, nil
			}
		}
		err = cms.Delete(ctx, created.Name, metav1.DeleteOptions{
			DryRun:        []string{metav1.DryRunAll},
			Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion},
		})
		if wantRefused {
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "teardown-lien-deny"), nil
		}
		return err == nil, nil
	})
}

// waitNotEnforced returns once kube-apiserver no longer enforces the lien
// policy: the dry-run DELETE of the labelled UninstallProbe is allowed
// (probeDelete). The probe is then deleted.
func waitNotEnforced(ctx context.Context, cfg *rest.Config, ns string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	created := probe(metav1.ObjectMeta{Name: UninstallProbe}, lien.UninstallProbeLien, "teardown uninstall checks that the lien policy is no longer enforced")
	// The tamper policy refuses to create a lien-labelled object for as
	// long as kube-apiserver still enforces it: that is the first wait.
	var createErr error
	if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, createErr = cms.Create(ctx, created, metav1.CreateOptions{})
		return !apierrors.IsForbidden(createErr), nil
	}); pollErr != nil && createErr == nil {
		createErr = pollErr
	}
	err = createErr
	if apierrors.IsAlreadyExists(err) {
		// Left by an interrupted run, or not ours: only a labelled one tells.
		var existing *corev1.ConfigMap
		if existing, err = cms.Get(ctx, UninstallProbe, metav1.GetOptions{}); err == nil && existing.Labels[lien.Label] != lien.LabelDeny {
			err = errors.New("it exists without the label " + lien.Label + "=" + lien.LabelDeny + ": delete it, or pass another --namespace")
		}
	}
	if err != nil {
		return fmt.Errorf("creating the policy probe configmap %s/%s: %w", ns, UninstallProbe, err)
	}
	// The tamper policy no longer refuses: the caller may mark it again.
	err = probeDelete(ctx, cms, cms, created, false)
	if err != nil {
		err = fmt.Errorf("waiting for kube-apiserver to stop enforcing the lien policy (probe %s/%s): %w", ns, UninstallProbe, err)
	}
	// The probe goes even if the wait failed or was interrupted.
	return errors.Join(err, removeProbe(ctx, cms, cms, ns, UninstallProbe))
}

// removeProbe deletes the probe ns/name; if the lien policy refuses (still
// enforced: a wait that failed, or install's), it first takes the
// probe's markers off through marker. A probe whose DELETE is allowed is
// never written: the chart's uninstall hook may only get and delete it.
// It has a minute of its own: ctx done (the wait interrupted) does not
// stop it.
func removeProbe(ctx context.Context, cms, marker corev1client.ConfigMapInterface, ns, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := cms.Delete(ctx, name, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	patch := []byte(`{"metadata":{"labels":{"` + lien.Label + `":null},"annotations":{"` + lien.Annotation + `":null}}}`)
	// The tamper policy's parameters may take a moment to be seen.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := marker.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err == nil || apierrors.IsNotFound(err), nil
	})
	if err == nil {
		if err = cms.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("removing the policy probe %s/%s: %w", ns, name, err)
	}
	return nil
}

// unmarkNamespaces takes the mark of a namespace whose deletion waits for
// Teardown plans (v1alpha1.NamespaceHoldLabel and the annotation naming
// them) off every namespace: once no Teardown exists, it waits for nothing.
func unmarkNamespaces(ctx context.Context, cfg *rest.Config, dryRun bool, out io.Writer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.NamespaceHoldLabel})
	if err != nil {
		return fmt.Errorf("listing the namespaces marked as waiting for Teardown plans: %w", err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null},"annotations":{%q:null}}}`, v1alpha1.NamespaceHoldLabel, v1alpha1.NamespacePlansAnnotation)
	var opts metav1.PatchOptions
	verb := "unmarked"
	if dryRun {
		opts.DryRun, verb = []string{metav1.DryRunAll}, "would unmark"
	}
	for _, n := range l.Items {
		if _, err := cs.CoreV1().Namespaces().Patch(ctx, n.Name, types.MergePatchType, patch, opts); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unmarking namespace %s: %w", n.Name, err)
		}
		fmt.Fprintf(out, "%s namespace %s (label %s: no Teardown is left)\n", verb, n.Name, v1alpha1.NamespaceHoldLabel)
	}
	return nil
}
