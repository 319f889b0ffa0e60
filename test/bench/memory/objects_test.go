//go:build integration

package memory

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

const (
	ownersPerNamespace = 10
	protectedLabel     = "bench.teardown.dev/protected"
)

// scenario is one set of objects both processes watch: dependent
// ConfigMaps, their owners, and a Lien.
type scenario struct {
	name  string // in log file names
	label string // after the number of ConfigMaps in a table's row; empty for the first scenario
	owner ownerKind
	// dataBytes is the size of every object's payload; helm puts Helm's
	// labels and annotations on every object as well.
	dataBytes int
	helm      bool
	arms      []arm // in the order of the first repetition
}

// suffix is what follows the number of ConfigMaps when the scenario is named.
func (sc scenario) suffix() string {
	if sc.label == "" {
		return ""
	}
	return ", " + sc.label
}

// ownerKind is the owners' kind.
type ownerKind struct {
	apiVersion, kind string
	payload          string                                            // the top-level field that holds an owner's payload
	install          func(ctx context.Context, cfg *rest.Config) error // makes the kind served, nil for a built-in one
}

var (
	configMapOwners = ownerKind{apiVersion: "v1", kind: "ConfigMap", payload: "data"}
	widgetOwners    = ownerKind{apiVersion: kit.WidgetGVR.GroupVersion().String(), kind: "Widget", payload: "spec", install: kit.InstallWidgets}
)

// population is a scenario's objects on a plane: nss namespaces, each with
// ownersPerNamespace owners and perNS dependent ConfigMaps. Each dependent
// has one native ownerReference (to an owner in its namespace: the
// built-in collector's edge) and one teardown owner link (to the owner of
// the same index in the next namespace: teardown's cross-namespace edge).
// In the first namespace a Lien held by an object of the owners' kind
// protects the owners, so the lien controller watches the owners' kind as
// well.
type population struct {
	p       *plane
	sc      scenario
	nss     int
	owners  []*unstructured.Unstructured
	perNS   int
	payload string
}

// populate makes the namespaces, the owners and the Lien, no dependents yet.
func populate(b *testing.B, p *plane, sc scenario, nss int) *population {
	b.Helper()
	ctx := b.Context()
	pop := &population{p: p, sc: sc, nss: nss, owners: make([]*unstructured.Unstructured, nss*ownersPerNamespace), payload: payload(sc.dataBytes)}
	if sc.owner.install != nil {
		if err := sc.owner.install(ctx, p.RESTConfig()); err != nil {
			b.Fatal(err)
		}
	}
	parallel(b, nss, func(i int) error {
		_, err := p.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pop.ns(i)}}, metav1.CreateOptions{})
		return err
	})
	parallel(b, len(pop.owners), func(i int) error {
		n := i / ownersPerNamespace
		labels := map[string]string{"app.kubernetes.io/name": "bench-memory-owner"}
		if n == 0 {
			labels[protectedLabel] = "true"
		}
		o := pop.owner(pop.meta(n, fmt.Sprintf("owner-%d", i%ownersPerNamespace), labels), pop.payload)
		pop.owners[i] = o
		return p.k.Create(ctx, o)
	})
	holder := pop.owner(metav1.ObjectMeta{Namespace: pop.ns(0), Name: "holder"}, "")
	if err := p.k.Create(ctx, holder); err != nil {
		b.Fatal(err)
	}
	kind := v1alpha1.LienTarget{APIVersion: sc.owner.apiVersion, Kind: sc.owner.kind}
	protect, heldBy := kind, kind
	protect.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{protectedLabel: "true"}}
	heldBy.Name = holder.GetName()
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: pop.ns(0), Name: "keep"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{protect},
			HeldBy:  []v1alpha1.LienTarget{heldBy},
			Reason:  "the memory benchmark keeps these while the holder exists",
		},
	}
	if err := p.k.Create(ctx, l); err != nil {
		b.Fatal(err)
	}
	return pop
}

// grow adds dependents until each namespace has perNS.
func (pop *population) grow(b *testing.B, perNS int) {
	b.Helper()
	ctx := b.Context()
	from := pop.perNS
	parallel(b, pop.nss*(perNS-from), func(i int) error {
		n, j := i/(perNS-from), from+i%(perNS-from)
		native := pop.ownerOf(n, j)
		meta := pop.meta(n, fmt.Sprintf("dep-%d", j), map[string]string{"app.kubernetes.io/name": "bench-memory", "app.kubernetes.io/instance": native.GetName()})
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: native.GetAPIVersion(), Kind: native.GetKind(), Name: native.GetName(), UID: native.GetUID()}}
		if err := links.SetOwner(&meta, pop.ownerOf(n+1, j)); err != nil {
			return err
		}
		_, err := pop.p.kube.CoreV1().ConfigMaps(meta.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config.yaml": pop.payload}}, metav1.CreateOptions{})
		return err
	})
	pop.perNS = perNS
}

func (pop *population) ns(i int) string { return fmt.Sprintf("mem-%d", i%pop.nss) }

func (pop *population) ownerOf(n, j int) *unstructured.Unstructured {
	return pop.owners[(n%pop.nss)*ownersPerNamespace+j%ownersPerNamespace]
}

// meta is the metadata of an object in the n-th namespace, with Helm's
// labels and annotations when the scenario asks for them: what Helm and a
// chart's usual helpers put on every object they install, and a checksum
// annotation of the kind charts use to roll pods on a config change.
func (pop *population) meta(n int, name string, labels map[string]string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{Namespace: pop.ns(n), Name: name, Labels: labels}
	if pop.sc.helm {
		maps.Copy(meta.Labels, map[string]string{
			"app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/part-of":    "bench-memory",
			"app.kubernetes.io/component":  "config",
			"app.kubernetes.io/version":    "1.4.2",
			"helm.sh/chart":                "bench-memory-1.4.2",
		})
		meta.Annotations = map[string]string{
			"meta.helm.sh/release-name":      "bench-memory",
			"meta.helm.sh/release-namespace": meta.Namespace,
			"checksum/config":                fmt.Sprintf("%x", sha256.Sum256([]byte(pop.payload))),
		}
	}
	return meta
}

// owner is an object of the owners' kind with meta and, unless empty, a
// payload.
func (pop *population) owner(meta metav1.ObjectMeta, payload string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetAPIVersion(pop.sc.owner.apiVersion)
	o.SetKind(pop.sc.owner.kind)
	o.SetNamespace(meta.Namespace)
	o.SetName(meta.Name)
	o.SetLabels(meta.Labels)
	o.SetAnnotations(meta.Annotations)
	if payload != "" {
		o.Object[pop.sc.owner.payload] = map[string]any{"config.yaml": payload}
	}
	return o
}

// payload is a value of about n bytes that reads like a config file.
func payload(n int) string {
	var s strings.Builder
	for i := 0; s.Len() < n; i++ {
		fmt.Fprintf(&s, "setting-%03d: value-%03d\n", i, i)
	}
	return s.String()
}

func parallel(b *testing.B, n int, f func(i int) error) { kit.Parallel(b, 32, n, f) }
