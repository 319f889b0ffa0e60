package why

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Gather reads what `why` needs about target (read by resource.Get):
// metadata-only lists of what may depend on it, and the cluster-wide facts
// (controllers, webhooks, APIServices). It does not change anything.
func Gather(ctx context.Context, c *resource.Clients, t *cliresource.Info, now time.Time) (*Facts, error) {
	obj, ok := t.Object.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("reading %s: got %T, want an unstructured object", resource.Ref(t), t.Object)
	}
	var err error
	f := &Facts{Target: t, Object: obj, Now: now, DiscoveryFailures: map[string]string{}, ListFailures: map[string]string{}}
	isNamespace := f.targetIsNamespace()
	switch {
	case isNamespace:
		f.NamespaceLabels = f.Object.GetLabels()
	case t.Namespaced():
		ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, t.Namespace, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading namespace %s: %w", t.Namespace, err)
		}
		if err == nil {
			f.NamespaceLabels = ns.Labels
		}
	}

	// What may depend on the target: for a namespace its content and the
	// cluster-scoped objects; for an object with finalizers, whatever its
	// dependents could be (namespaced owners have dependents in their own
	// namespace and, through teardown links, anywhere).
	if isNamespace || len(f.Object.GetFinalizers()) > 0 {
		scope := resource.Scope{ClusterScoped: true, Skip: resource.Events}
		switch {
		case isNamespace:
			scope.Namespace = t.Name
			scope.Skip = nil
		case t.Namespaced():
			scope.Namespace = t.Namespace
		}
		inv, err := resource.Gather(ctx, c.Discovery, c.Metadata, scope)
		if err != nil {
			return nil, err
		}
		for k, v := range inv.Failed {
			f.ListFailures[k] = v.Error()
		}
		uid := f.Object.GetUID()
		for _, o := range inv.Objects {
			switch {
			case isNamespace && o.Namespace == t.Name:
				f.Content = append(f.Content, o)
			case isNamespace && tiedToNamespace(o, t.Name):
				f.Related = append(f.Related, o)
			case !isNamespace && dependsOn(o, uid):
				f.Related = append(f.Related, o)
			}
		}
	}
	if _, failed, err := resource.Discover(c.Discovery); err == nil {
		for gv, e := range failed {
			f.DiscoveryFailures[gv] = e.Error()
		}
	}

	if f.Controllers, err = doctor.GatherControllers(ctx, c.Kube, c.Dynamic, now); err != nil {
		return nil, err
	}
	if f.Webhooks, err = doctor.GatherWebhooks(ctx, c.Kube); err != nil {
		return nil, err
	}
	if f.APIServices, err = doctor.GatherUnavailableAPIServices(ctx, c.Dynamic); err != nil {
		return nil, err
	}
	if liens := lienNames(f); len(liens) > 0 {
		f.LienObjects = doctor.GatherLienObjects(ctx, c.Dynamic, liens)
		f.BreakGlass = gatherBreakGlass(ctx, c)
	}
	f.Plans = doctor.GatherPlans(ctx, c.Dynamic)
	if !isNamespace {
		rules := listOwnerRules(ctx, c)
		f.RuleOwners = gatherRuleOwners(ctx, c, f, rules)
		f.RuleDependents = gatherRuleDependents(ctx, c, f, rules)
		f.NotInForce = gatherNotInForce(ctx, c, f)
	}
	if err := gatherPods(ctx, c, f); err != nil {
		return nil, err
	}
	if err := gatherCRDs(ctx, c, f); err != nil {
		return nil, err
	}
	if err := gatherClaim(ctx, c, f); err != nil {
		return nil, err
	}
	return f, nil
}

// gatherClaim reads the claim a PersistentVolume target is bound to.
func gatherClaim(ctx context.Context, c *resource.Clients, f *Facts) error {
	if !f.targetIs("", "PersistentVolume") {
		return nil
	}
	ns, _, _ := unstructured.NestedString(f.Object.Object, "spec", "claimRef", "namespace")
	name, _, _ := unstructured.NestedString(f.Object.Object, "spec", "claimRef", "name")
	if name == "" {
		return nil
	}
	claim, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading claim %s/%s: %w", ns, name, err)
	}
	f.Claim = claim
	return nil
}

// gatherPods reads, for a Pod, a PersistentVolumeClaim or a Namespace, the
// namespace's pods in full (node, volumes) and the nodes they run on.
func gatherPods(ctx context.Context, c *resource.Clients, f *Facts) error {
	ns := f.Target.Namespace
	switch {
	case f.targetIsNamespace():
		ns = f.Target.Name
	case f.targetIs("", "Pod"), f.targetIs("", "PersistentVolumeClaim"):
	default:
		return nil
	}
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods in %s: %w", ns, err)
	}
	f.Pods = pods.Items
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	f.Nodes = map[string]*corev1.Node{}
	for i := range nodes.Items {
		f.Nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	return nil
}

// gatherCRDs reads the CRDs when a list failed (a conversion webhook may
// be why) or the target is one, and then the target's custom resources.
func gatherCRDs(ctx context.Context, c *resource.Clients, f *Facts) error {
	isCRD := f.targetIs("apiextensions.k8s.io", "CustomResourceDefinition")
	if len(f.ListFailures) == 0 && !isCRD {
		return nil
	}
	var err error
	if f.CRDs, err = doctor.GatherCRDs(ctx, c.Dynamic); err != nil {
		return err
	}
	if !isCRD {
		return nil
	}
	crd := doctor.CRDOf(f.Object)
	if len(crd.Versions) == 0 {
		return nil
	}
	r := resource.APIResource{GVR: crd.GVR(crd.Versions[0]), Kind: crd.Kind, Namespaced: crd.Namespaced}
	for _, v := range crd.Versions {
		if v == crd.Storage {
			r.GVR = crd.GVR(v) // read at the storage version: no conversion needed for most objects
		}
	}
	list, err := c.Metadata.Resource(r.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.InstancesFailed = err.Error()
		f.ListFailures[r.GVR.String()] = err.Error()
		return nil
	}
	for i := range list.Items {
		f.Instances = append(f.Instances, &resource.Object{Resource: r, ObjectMeta: list.Items[i].ObjectMeta})
	}
	return nil
}

// tiedToNamespace: an object outside the namespace that Helm installed from
// it or that names an owner in it.
func tiedToNamespace(o *resource.Object, ns string) bool {
	if o.Annotations[doctor.HelmReleaseNS] == ns {
		return true
	}
	for _, ow := range doctor.OwnersOf(o) {
		if ow.Namespace == ns {
			return true
		}
	}
	return false
}

func dependsOn(o *resource.Object, uid types.UID) bool {
	for _, r := range o.OwnerReferences {
		if r.UID == uid {
			return true
		}
	}
	for _, ow := range doctor.OwnersOf(o) {
		if ow.UID == uid {
			return true
		}
	}
	return false
}

func lienNames(f *Facts) []string {
	seen := map[string]bool{}
	add := func(labels, annotations map[string]string, finalizers []string) {
		for _, l := range doctor.LiensOf(labels, annotations, finalizers) {
			if l.Source == "teardown" && l.Name != "(unnamed)" {
				seen[l.Name] = true
			}
		}
	}
	add(f.Object.GetLabels(), f.Object.GetAnnotations(), f.Object.GetFinalizers())
	for _, o := range f.Content {
		add(o.Labels, o.Annotations, o.Finalizers)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
