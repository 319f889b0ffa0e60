package suggest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/helmrelease"
)

// Facts are what Suggest works from, read from the cluster by Gather (or
// from a recorded state, in tests).
type Facts struct {
	// Deployment is the operator's.
	Deployment *appsv1.Deployment
	// Release is the Helm release that installed it ("" when none), and
	// ReleaseObjects the objects its latest record's manifest lists.
	Release        string
	ReleaseObjects []*unstructured.Unstructured
	// ReleaseValues are the latest record's values: the chart's defaults
	// (which say where the chart takes extra objects) and the user's.
	ReleaseValues helmrelease.Values
	// ReleaseRecords are the names of the release's records (Secrets),
	// sorted, and ReleaseRevision the latest record's revision.
	ReleaseRecords  []string
	ReleaseRevision int

	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding

	ValidatingWebhooks []admissionregistrationv1.ValidatingWebhookConfiguration
	MutatingWebhooks   []admissionregistrationv1.MutatingWebhookConfiguration
	// APIServices are the aggregated APIs, as read (apiregistration.k8s.io).
	APIServices []unstructured.Unstructured

	CRDs []apiextensionsv1.CustomResourceDefinition
	// CustomResources are the objects of the operator's CRDs
	// (OperatorCRDs), by CRD name.
	CustomResources map[string][]unstructured.Unstructured
	// Resources maps the kinds of ReleaseObjects to their resource and
	// scope, as the API server serves them.
	Resources map[schema.GroupKind]Resource
	// Workloads are the Deployments, DaemonSets, StatefulSets and Services
	// of the operator's namespace: what owns them tells which custom
	// resource runs the operator's servers.
	Workloads []unstructured.Unstructured
}

var (
	crdGVR        = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	workloadGVRs  = []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Version: "v1", Resource: "services"},
	}
)

// Target names what to suggest a plan for: a Deployment, or a Helm
// release (its one Deployment), in Namespace.
type Target struct {
	Namespace  string
	Deployment string
	Release    string
}

// Gather reads what Suggest needs, read-only.
func Gather(ctx context.Context, c *resource.Clients, target Target) (*Facts, error) {
	f := &Facts{Release: target.Release}
	ns := target.Namespace
	if f.Release != "" {
		if err := readRelease(ctx, c, f, ns); err != nil {
			return nil, err
		}
		if target.Deployment == "" {
			var names []string
			for _, o := range f.ReleaseObjects {
				if o.GetKind() == "Deployment" && o.GroupVersionKind().Group == "apps" {
					names = append(names, o.GetName())
				}
			}
			if len(names) != 1 {
				return nil, fmt.Errorf("helm release %s in namespace %s has %d Deployments (%s): name the operator's, deployment/NAME", f.Release, ns, len(names), strings.Join(names, ", "))
			}
			target.Deployment = names[0]
		}
	}
	d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, target.Deployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deployment %s not found in namespace %s", target.Deployment, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading deployment %s/%s: %w", ns, target.Deployment, err)
	}
	f.Deployment = d
	if f.Release == "" && d.Annotations[helmReleaseName] != "" && d.Annotations[helmReleaseNamespace] == ns {
		f.Release = d.Annotations[helmReleaseName]
		if err := readRelease(ctx, c, f, ns); err != nil {
			return nil, err
		}
	}
	f.Resources = map[schema.GroupKind]Resource{}
	for _, o := range f.ReleaseObjects {
		gvk := o.GroupVersionKind()
		m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // not served (its CRD gone): Suggest says so
		}
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", gvk, err)
		}
		f.Resources[gvk.GroupKind()] = Resource{Name: m.Resource.Resource, Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
	}
	if err := f.gatherRBAC(ctx, c); err != nil {
		return nil, err
	}
	if err := f.gatherAPIs(ctx, c); err != nil {
		return nil, err
	}
	f.CustomResources = map[string][]unstructured.Unstructured{}
	for _, crd := range OperatorCRDs(f) {
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: storageVersion(crd), Resource: crd.Spec.Names.Plural}
		l, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", crd.Name, err)
		}
		f.CustomResources[crd.Name] = l.Items
	}
	for _, gvr := range workloadGVRs {
		l, err := c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s in namespace %s: %w", gvr.Resource, ns, err)
		}
		f.Workloads = append(f.Workloads, l.Items...)
	}
	return f, nil
}

const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// readRelease reads f.Release's records in ns: the objects and values of
// the latest, the names of all.
func readRelease(ctx context.Context, c *resource.Clients, f *Facts, ns string) error {
	name := f.Release
	l, err := c.Kube.CoreV1().Secrets(ns).List(ctx, helmrelease.ListOptions(name))
	if err != nil {
		return fmt.Errorf("listing the records of helm release %s in namespace %s: %w", name, ns, err)
	}
	latest := helmrelease.Latest(l.Items)
	if latest == nil {
		return fmt.Errorf("helm release %s not found in namespace %s (no Secret labelled %s)", name, ns, helmrelease.Selector(name))
	}
	objs, err := helmrelease.Objects(latest.Data["release"])
	if err != nil {
		return fmt.Errorf("reading helm release record %s/%s: %w", ns, latest.Name, err)
	}
	values, err := helmrelease.ReadValues(latest.Data["release"])
	if err != nil {
		return fmt.Errorf("reading helm release record %s/%s: %w", ns, latest.Name, err)
	}
	f.ReleaseObjects, f.ReleaseValues, f.ReleaseRevision = objs, values, helmrelease.Version(*latest)
	f.ReleaseRecords = nil
	for _, r := range l.Items {
		f.ReleaseRecords = append(f.ReleaseRecords, r.Name)
	}
	slices.Sort(f.ReleaseRecords)
	return nil
}

func (f *Facts) gatherRBAC(ctx context.Context, c *resource.Clients) error {
	rbac := c.Kube.RbacV1()
	crs, err := rbac.ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing clusterroles: %w", err)
	}
	crbs, err := rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing clusterrolebindings: %w", err)
	}
	rs, err := rbac.Roles(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing roles: %w", err)
	}
	rbs, err := rbac.RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing rolebindings: %w", err)
	}
	f.ClusterRoles, f.ClusterRoleBindings, f.Roles, f.RoleBindings = crs.Items, crbs.Items, rs.Items, rbs.Items
	return nil
}

func (f *Facts) gatherAPIs(ctx context.Context, c *resource.Clients) error {
	adm := c.Kube.AdmissionregistrationV1()
	v, err := adm.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing validatingwebhookconfigurations: %w", err)
	}
	m, err := adm.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing mutatingwebhookconfigurations: %w", err)
	}
	f.ValidatingWebhooks, f.MutatingWebhooks = v.Items, m.Items
	a, err := c.Dynamic.Resource(apiServiceGVR).List(ctx, metav1.ListOptions{})
	if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("listing apiservices: %w", err)
	}
	if a != nil {
		f.APIServices = a.Items
	}
	crds, err := c.Dynamic.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing customresourcedefinitions: %w", err)
	}
	for _, u := range crds.Items {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return fmt.Errorf("reading customresourcedefinition %s: %w", u.GetName(), err)
		}
		f.CRDs = append(f.CRDs, crd)
	}
	return nil
}

// storageVersion is the version a CRD stores (the one to list it by).
func storageVersion(crd apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

// Resource is a kind's resource name and scope.
type Resource struct {
	Name       string
	Namespaced bool
}
