//go:build integration

package security

import (
	"cmp"
	"fmt"
	"io/fs"
	"iter"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/config"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// clusterScopedKind is a cluster-scoped kind of a built-in group (no dot,
// or ending in .k8s.io) or of teardown.dev, as the scope lists of the
// owner-links policy and the lien CRDs write it: Kind, or Kind.group.
type clusterScopedKind struct {
	gv   schema.GroupVersion
	kind string
}

func (k clusterScopedKind) String() string {
	if k.gv.Group == "" {
		return k.kind
	}
	return k.kind + "." + k.gv.Group
}

// builtinClusterScoped walks discovery: every cluster-scoped kind with
// objects one can read (verb get; reviews such as TokenReview have none) of
// Kubernetes' own groups and teardown.dev, sorted by group, then kind.
func builtinClusterScoped(t *testing.T) []clusterScopedKind {
	t.Helper()
	var out []clusterScopedKind
	for gv, r := range preferredResources(t) {
		if strings.Contains(gv.Group, ".") && !strings.HasSuffix(gv.Group, ".k8s.io") && gv.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		if r.Namespaced || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "get") {
			continue
		}
		out = append(out, clusterScopedKind{gv: gv, kind: r.Kind})
	}
	slices.SortFunc(out, func(a, b clusterScopedKind) int {
		return cmp.Or(strings.Compare(a.gv.Group, b.gv.Group), strings.Compare(a.kind, b.kind))
	})
	return slices.CompactFunc(out, func(a, b clusterScopedKind) bool { return a.String() == b.String() })
}

// preferredResources yields every resource discovery serves, at its
// group's preferred version.
func preferredResources(t *testing.T) iter.Seq2[schema.GroupVersion, metav1.APIResource] {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	return func(yield func(schema.GroupVersion, metav1.APIResource) bool) {
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.APIResources {
				if !yield(gv, r) {
					return
				}
			}
		}
	}
}

// scopeList matches the CEL list of cluster-scoped kinds in the policies
// and CRDs: it begins with the core group's ComponentStatus.
var scopeList = regexp.MustCompile(`\['ComponentStatus'[^\]]*\]`)

// TestScopeListsAreDiscoverys: the lists of cluster-scoped kinds that
// teardown-owner-links and the Lien and ClusterLien schemas refuse a
// namespace on (CEL has no REST mapping) are exactly the cluster-scoped
// kinds the local control plane serves in Kubernetes' own groups and
// teardown.dev: a kind added by a new Kubernetes version fails this test,
// which prints the list to write.
func TestScopeListsAreDiscoverys(t *testing.T) {
	var names []string
	for _, k := range builtinClusterScoped(t) {
		names = append(names, "'"+k.String()+"'")
	}
	want := "[" + strings.Join(names, ", ") + "]"
	if len(names) < 30 {
		t.Fatalf("discovery found only %d cluster-scoped kinds: %s", len(names), want)
	}
	for _, file := range []string{"policy/owner-links.yaml", "crd/bases/teardown.dev_liens.yaml", "crd/bases/teardown.dev_clusterliens.yaml"} {
		raw, err := fs.ReadFile(config.Manifests, file)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for doc := range strings.SplitSeq(string(raw), "\n---\n") {
			var v any
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, s := range yamlStrings(v) {
				found = append(found, scopeList.FindAllString(s, -1)...)
			}
		}
		if len(found) == 0 {
			t.Errorf("%s has no list of cluster-scoped kinds; want %s", file, want)
		}
		for _, got := range found {
			if got != want {
				t.Errorf("%s lists the cluster-scoped kinds\n%s\ndiscovery serves\n%s", file, got, want)
			}
		}
	}
}

// yamlStrings is every string in v, a decoded YAML document.
func yamlStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, yamlStrings(x)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, x := range v {
			out = append(out, yamlStrings(x)...)
		}
		return out
	}
	return nil
}

// TestWrongScopeIsRefusedAtAdmission: for every cluster-scoped kind of
// Kubernetes' own groups (and teardown.dev) that discovery lists, a tenant
// with the cluster-admin ClusterRole bound in its own namespace may not
// write an owner link to an object of it giving a namespace (the rights
// would be checked in the tenant's namespace, where it may do anything),
// a ClusterLien entry of it may not give a namespace, and a Lien may not
// name it at all: each is refused at admission, the refusal naming the
// field and saying why.
func TestWrongScopeIsRefusedAtAdmission(t *testing.T) {
	ctx := t.Context()
	evil := namespace(t, "evil-scope")
	tenant := serviceAccount(t, evil, "tenant", nil, "cluster-admin")
	kinds := builtinClusterScoped(t)
	for i, k := range kinds {
		link := fmt.Sprintf(`[{"apiVersion":%q,"kind":%q,"namespace":%q,"name":"victim","uid":"uid-%d"}]`, k.gv.String(), k.kind, evil, i)
		hook := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: evil, Name: fmt.Sprintf("hook-%d", i),
			Labels:      map[string]string{dependents.OwnedLabel: "true"},
			Annotations: map[string]string{dependents.OwnersAnnotation: link},
		}}
		refusedEach(t, "an owner link to "+k.String()+" with a namespace", tenant.Create(ctx, hook, client.DryRunAll),
			"kind "+k.kind+" is cluster-scoped", "remove namespace")

		cl := &v1alpha1.ClusterLien{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scope-%d", i)},
			Spec: v1alpha1.ClusterLienSpec{
				Protect: []v1alpha1.ClusterLienTarget{{APIVersion: k.gv.String(), Kind: k.kind, Namespace: evil, Name: "victim"}},
				Reason:  "the security suite needs it",
			},
		}
		refusedEach(t, "a ClusterLien entry of "+k.String()+" with a namespace", admin.Create(ctx, cl, client.DryRunAll),
			"spec.protect[0].namespace", "kind "+k.kind+" is cluster-scoped")
		cl.Spec.Protect[0].Namespace = ""
		cl.Spec.HeldBy = []v1alpha1.ClusterLienTarget{{APIVersion: k.gv.String(), Kind: k.kind, Namespace: evil, Name: "holder"}}
		refusedEach(t, "a ClusterLien holder of "+k.String()+" with a namespace", admin.Create(ctx, cl, client.DryRunAll),
			"spec.heldBy[0].namespace", "kind "+k.kind+" is cluster-scoped")

		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: fmt.Sprintf("scope-%d", i)},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: k.gv.String(), Kind: k.kind, Name: "victim"}},
				Reason:  "the security suite needs it",
			},
		}
		refusedEach(t, "a Lien on "+k.String(), tenant.Create(ctx, l, client.DryRunAll),
			"spec.protect[0].kind", "kind "+k.kind+" is cluster-scoped")
	}
	t.Logf("a namespace refused on %d cluster-scoped kinds", len(kinds))

	// The right scope still passes: a link to a cluster-scoped owner
	// without a namespace, to a namespaced one with it (the rights checks
	// decide), and a ClusterLien entry of a cluster-scoped kind without one.
	ok := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: evil, Name: "ok",
		Labels: map[string]string{dependents.OwnedLabel: "true"},
		Annotations: map[string]string{dependents.OwnersAnnotation: fmt.Sprintf(
			`[{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"owner","uid":"uid-a"}]`, evil)},
	}}
	if err := tenant.Create(ctx, ok, client.DryRunAll); err != nil {
		t.Errorf("a link to a ConfigMap of the tenant's namespace: %v, want accepted", err)
	}
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "scope-ok"},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "Namespace", Name: evil}, {APIVersion: "v1", Kind: "Secret", Namespace: evil, Name: "s"}},
			Reason:  "the security suite needs it",
		},
	}
	if err := admin.Create(ctx, cl, client.DryRunAll); err != nil {
		t.Errorf("a ClusterLien on a Namespace without namespace and a Secret with one: %v, want accepted", err)
	}
}

// refusedEach is refused for one case of many: it goes on to the next.
func refusedEach(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want refused", what)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refusal %q lacks %q", what, err, w)
		}
	}
}
