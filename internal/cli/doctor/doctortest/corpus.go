package doctortest

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
)

// The fixtures of the corpus of real stuck deletions: custom resources
// with an operator's finalizer, nodes whose kubelet is gone, pods bound to
// them, aggregated APIs and webhooks whose server is gone. Nothing here
// makes kube-apiserver dial anything: servers are Services that do not
// exist.

// CRD is a CustomResourceDefinition of kind in group, at versions (the
// last is the storage version), with an open schema.
func CRD(group, kind, plural string, namespaced bool, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	scope := apiextensionsv1.ClusterScoped
	if namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == len(versions)-1,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
		})
	}
	return crd
}

// EnsureCRDOf installs crd and waits until it serves; it returns the
// resource at its storage version.
func (e *Env) EnsureCRDOf(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) schema.GroupVersionResource {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[len(crd.Spec.Versions)-1].Name, Resource: crd.Spec.Names.Plural}
	e.EnsureCRD(t, crd, gvr)
	return gvr
}

// CreateHeld creates an object of gvr (namespace "" for cluster-scoped)
// and then writes finalizers to it as field manager manager: an Update (a
// controller adding its own finalizer) or, with apply, a server-side apply
// (a manifest). The test's cleanup removes the finalizers again.
func (e *Env) CreateHeld(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name, manager string, apply bool, finalizers ...string) {
	t.Helper()
	ctx := context.Background()
	r := e.Dynamic.Resource(gvr).Namespace(ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind, "metadata": map[string]any{"name": name},
		"spec": map[string]any{"size": int64(1)},
	}}
	if ns != "" {
		obj.SetNamespace(ns)
	}
	if _, err := r.Create(ctx, obj, metav1.CreateOptions{FieldManager: "installer"}); err != nil {
		t.Fatalf("creating %s %s/%s: %v", kind, ns, name, err)
	}
	t.Cleanup(func() { e.ClearFinalizers(gvr, ns, name) })
	var fins []any
	for _, f := range finalizers {
		fins = append(fins, f)
	}
	if apply {
		patch := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind, "metadata": map[string]any{"name": name, "finalizers": fins}}}
		if ns != "" {
			patch.SetNamespace(ns)
		}
		if _, err := r.Apply(ctx, name, patch, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
			t.Fatalf("applying finalizers to %s %s/%s: %v", kind, ns, name, err)
		}
		return
	}
	cur, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.SetFinalizers(finalizers)
	if _, err := r.Update(ctx, cur, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		t.Fatalf("adding finalizers to %s %s/%s: %v", kind, ns, name, err)
	}
}

// ClearFinalizers removes every finalizer of the object, if it still exists.
func (e *Env) ClearFinalizers(gvr schema.GroupVersionResource, ns, name string) {
	_, _ = e.Dynamic.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
}

// DeadNode creates a Node whose kubelet stopped reporting at heartbeat
// (Ready Unknown, NodeStatusUnknown), as the node lifecycle controller
// marks one; it is deleted at the end of the test.
func (e *Env) DeadNode(t *testing.T, name string, heartbeat time.Time) {
	t.Helper()
	ctx := context.Background()
	n, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
		LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat.Add(40 * time.Second)),
	}}
	if _, err := e.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking node %s NotReady: %v", name, err)
	}
}

// BoundPod creates a pod bound to node (no scheduler or kubelet runs: it
// stays Pending there), using the claims named; the test's cleanup
// force-deletes it.
func (e *Env) BoundPod(t *testing.T, ns, name, node string, claims ...string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		// A short grace period: the namespace controller waits that long
		// before it reports what remains.
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(false), TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	// Right after the namespace is created its default service account may
	// not exist yet, and the ServiceAccount admission refuses the pod.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	})
}

// MissingServiceAPIService registers an aggregated API served by a Service
// that does not exist (Available=False, ServiceNotFound); it is deleted at
// the end of the test.
func (e *Env) MissingServiceAPIService(t *testing.T, group, version, ns, service string) {
	t.Helper()
	ctx := context.Background()
	apiservices := e.Dynamic.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	name := version + "." + group
	if _, err := apiservices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "version": version, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": ns, "name": service},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating apiservice %s: %v", name, err)
	}
	t.Cleanup(func() { _ = apiservices.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		a, err := apiservices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Available" && m["status"] == "False" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("waiting for apiservice %s to be reported unavailable: %v", name, err)
	}
}

// WaitFor polls cond until it holds (at most two minutes).
func WaitFor(t *testing.T, what string, cond func(context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

var (
	stamps = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z`)
	// etcd revisions in storage errors.
	revisions = regexp.MustCompile(`revision=\d+`)
	// Values of removal commands: a JSON patch's test value, a finalize
	// command's entry.
	patchValue    = regexp.MustCompile(`"op":"test","path":"/metadata/finalizers/\d+","value":"([^"]+)"`)
	finalizeValue = regexp.MustCompile(`\.spec\.finalizers -= \["([^"]+)"\]`)
)

// Normalize makes an answer comparable with its golden file: timestamps
// (deletions, heartbeats) become <time>, etcd revisions <n>.
func Normalize(out string) string {
	return revisions.ReplaceAllString(stamps.ReplaceAllString(out, "<time>"), "revision=<n>")
}

// Golden compares got (normalized) with testdata/corpus/name; with
// -update it rewrites the file first.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	got = Normalize(got)
	path := filepath.Join("testdata", "corpus", name)
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -args -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// AssertSafe fails when an answer advises removing one of Kubernetes' own
// finalizers, or says "nobody" of a finalizer added by hand.
func AssertSafe(t *testing.T, out string) {
	t.Helper()
	for _, m := range patchValue.FindAllStringSubmatch(out, -1) {
		if doctor.KubernetesOwned(m[1]) {
			t.Errorf("advises removing Kubernetes' finalizer %s", m[1])
		}
	}
	for _, m := range finalizeValue.FindAllStringSubmatch(out, -1) {
		if m[1] == "kubernetes" {
			t.Errorf("advises removing the namespace controller's finalizer")
		}
	}
	if strings.Contains(out, "nobody: it was added by hand") {
		t.Error("says nobody removes a finalizer that was only written by hand")
	}
	if strings.Contains(out, `"op":"remove","path":"/metadata/finalizers"}`) {
		t.Error("advises removing every finalizer at once")
	}
}

// Updating reports whether the test binary runs with -update (the flag of the package's
// golden-file unit tests), so goldens are rewritten.
func Updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}
