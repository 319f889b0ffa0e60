package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// A recorded state is a directory of YAML files, one object each, named
// by kind, namespace and name: what a cluster held, without what the API
// server sets (uid, resourceVersion, timestamps, status), each with the
// manager that wrote it first. LoadState creates them in another cluster,
// in an order that lets them be created (namespaces and CRDs first,
// owners before what they own, a namespace an object owns and its content
// after that object, webhook configurations last, as they could
// refuse the rest) and with the owner references' UIDs mapped to the new
// owners'. What runs there afterwards (controllers) may add to it.

// recordedResources are skipped when recording: what controllers make
// from the rest (Pods, ReplicaSets, endpoints), what only says what
// happened (Events, Leases), and teardown's own objects.
var recordedSkip = []string{"pods", "replicasets", "controllerrevisions", "endpoints", "endpointslices", "events", "leases", "configmaps", "jobs", "ipaddresses"}

// managerAnnotation carries, in a recorded object, the manager that wrote
// it first (its managedFields are not recorded).
const managerAnnotation = "testenv.teardown.dev/manager"

// RecordState writes into dir every object of the cluster whose UID is
// not in skip, except the kinds of recordedSkip, teardown's objects and
// Secrets other than Helm's release records.
func RecordState(ctx context.Context, cfg *rest.Config, dir string, skip map[types.UID]bool) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return err
		}
		if gv.Group == "teardown.dev" {
			continue
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || slices.Contains(recordedSkip, r.Name) || strings.Contains(r.Name, "/") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for i := range items.Items {
				o := &items.Items[i]
				if skip[o.GetUID()] || r.Name == "secrets" && !strings.HasPrefix(fmt.Sprint(o.Object["type"]), "helm.sh/release") {
					continue
				}
				if _, remote, _ := unstructured.NestedMap(o.Object, "spec", "service"); r.Name == "apiservices" && !remote {
					continue // the API server's own, for a built-in group or a CRD
				}
				if r.Name == "services" { // addresses the API server allocates
					unstructured.RemoveNestedField(o.Object, "spec", "clusterIP")
					unstructured.RemoveNestedField(o.Object, "spec", "clusterIPs")
				}
				if err := writeRecorded(dir, r.Name, o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func writeRecorded(dir, resource string, o *unstructured.Unstructured) error {
	if mf := o.GetManagedFields(); len(mf) > 0 {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[managerAnnotation] = mf[0].Manager
		o.SetAnnotations(a)
	}
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	delete(o.Object, "status")
	raw, err := yaml.Marshal(o.Object)
	if err != nil {
		return err
	}
	name := resource + "." + o.GetName() + ".yaml"
	if o.GetNamespace() != "" {
		name = resource + "." + o.GetNamespace() + "." + o.GetName() + ".yaml"
	}
	return os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, ":", "_")), raw, 0o644)
}

// LoadState creates the objects recorded in dir (RecordState) in the
// cluster of cfg.
func LoadState(ctx context.Context, cfg *rest.Config, dir string) error {
	objs, err := readState(dir)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l := &loader{dyn: dyn, mapper: mapper, uids: map[string]types.UID{}}
	rank := func(o *unstructured.Unstructured) int {
		switch gk := o.GroupVersionKind().GroupKind(); {
		case gk.Kind == "Namespace" && gk.Group == "" && len(o.GetOwnerReferences()) == 0:
			return 0
		case gk.Kind == "CustomResourceDefinition":
			return 1
		case strings.HasSuffix(gk.Kind, "WebhookConfiguration"), gk.Kind == "APIService":
			return 4
		case len(o.GetOwnerReferences()) > 0:
			return 3
		}
		return 2
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	for _, ns := range namespacesOf(objs) {
		n := &unstructured.Unstructured{}
		n.SetAPIVersion("v1")
		n.SetKind("Namespace")
		n.SetName(ns)
		if err := l.create(ctx, n, ""); err != nil {
			return err
		}
	}
	// Rank by rank, each object once its namespace and owners are there
	// (a namespace an object of the state owns, with what is in it, waits
	// for that owner); what waits goes on to the next rank.
	var waiting []*unstructured.Unstructured
	for r := 0; r <= 4; r++ {
		if r == 2 {
			// The CRDs serve once established: the mapper must see them.
			if err := waitServed(ctx, cached, objs); err != nil {
				return err
			}
			mapper.Reset()
		}
		for _, o := range objs {
			if rank(o) == r {
				waiting = append(waiting, o)
			}
		}
		for progress := true; progress && len(waiting) > 0; {
			progress = false
			var still []*unstructured.Unstructured
			for _, o := range waiting {
				if !l.ready(o) {
					still = append(still, o)
					continue
				}
				if err := l.create(ctx, o, o.GetAnnotations()[managerAnnotation]); err != nil {
					return err
				}
				progress = true
			}
			waiting = still
		}
	}
	for _, o := range waiting { // their namespace or an owner is not in the state: say which
		if err := l.create(ctx, o, o.GetAnnotations()[managerAnnotation]); err != nil {
			return err
		}
	}
	return nil
}

type loader struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	uids   map[string]types.UID // by apiVersion-less kind/namespace/name
}

// ready reports whether o's namespace and owners have been created.
func (l *loader) ready(o *unstructured.Unstructured) bool {
	if ns := o.GetNamespace(); ns != "" {
		if _, ok := l.uids["Namespace//"+ns]; !ok {
			return false
		}
	}
	for _, ref := range o.GetOwnerReferences() {
		_, ok := l.uids[ref.Kind+"/"+o.GetNamespace()+"/"+ref.Name]
		if _, cluster := l.uids[ref.Kind+"//"+ref.Name]; !ok && !cluster {
			return false
		}
	}
	return true
}

func (l *loader) create(ctx context.Context, o *unstructured.Unstructured, manager string) error {
	gvk := o.GroupVersionKind()
	m, err := l.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("mapping %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		uid, ok := l.uids[refs[i].Kind+"/"+o.GetNamespace()+"/"+refs[i].Name]
		if !ok {
			uid, ok = l.uids[refs[i].Kind+"//"+refs[i].Name]
		}
		if !ok {
			return fmt.Errorf("%s %s/%s: its owner %s %s is not in the state", gvk.Kind, o.GetNamespace(), o.GetName(), refs[i].Kind, refs[i].Name)
		}
		refs[i].UID = uid
	}
	o.SetOwnerReferences(refs)
	if a := o.GetAnnotations(); a != nil {
		delete(a, managerAnnotation)
		o.SetAnnotations(a)
	}
	ri := l.dyn.Resource(m.Resource)
	var c dynamic.ResourceInterface = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		c = ri.Namespace(o.GetNamespace())
	}
	opts := metav1.CreateOptions{FieldManager: manager}
	got, err := c.Create(ctx, o, opts)
	if apierrors.IsAlreadyExists(err) {
		got, err = c.Get(ctx, o.GetName(), metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	l.uids[gvk.Kind+"/"+o.GetNamespace()+"/"+o.GetName()] = got.GetUID()
	return nil
}

func readState(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no recorded state in %s", dir)
	}
	slices.Sort(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// namespacesOf are the namespaces objects live in but that the state
// does not hold.
func namespacesOf(objs []*unstructured.Unstructured) []string {
	var have, need []string
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			have = append(have, o.GetName())
		}
		if o.GetNamespace() != "" {
			need = append(need, o.GetNamespace())
		}
	}
	slices.Sort(need)
	return slices.DeleteFunc(slices.Compact(need), func(n string) bool { return slices.Contains(have, n) })
}

// waitServed waits until every kind of objs is served.
func waitServed(ctx context.Context, cached discovery.CachedDiscoveryInterface, objs []*unstructured.Unstructured) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		cached.Invalidate()
		m := restmapper.NewDeferredDiscoveryRESTMapper(cached)
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}
