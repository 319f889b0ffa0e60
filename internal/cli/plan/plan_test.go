//go:build integration

package plan_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: new(true), BlockOwnerDeletion: new(true)}
}

// must panics on a fixture error (the test fails with it).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func linkTo(w *unstructured.Unstructured) map[string]string {
	return map[string]string{"teardown.dev/owners": `[{"apiVersion":"example.com/v1","kind":"Widget","namespace":"` + w.GetNamespace() + `","name":"` + w.GetName() + `","uid":"` + string(w.GetUID()) + `"}]`}
}

// A namespace with a native owner chain, cross-scope dependents (native
// and teardown owner links, one under an Orphan policy) and a lien.
func TestPlanNamespace(t *testing.T) {
	const ns, elsewhere = "plan-demo", "plan-elsewhere"
	ctx := t.Context()
	kube := env.Kube
	env.EnsureWidgetCRD(t)
	env.CreateNamespace(t, ns, nil)
	env.CreateNamespace(t, elsewhere, nil)
	nsObj := must(kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}))

	dep := must(kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{}))
	rs := must(kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f", OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", "web", dep.UID)}},
		Spec:       appsv1.ReplicaSetSpec{Selector: dep.Spec.Selector, Template: dep.Spec.Template},
	}, metav1.CreateOptions{}))
	must(kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f-x2x", Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}},
		Spec:       dep.Spec.Template.Spec,
	}, metav1.CreateOptions{}))

	owner := env.CreateWidget(t, ns, "owner", "widget-operator")
	keeper := env.CreateWidget(t, ns, "keeper", "widget-operator")
	keeper.SetLabels(map[string]string{"teardown.dev/deletion-policy": "Orphan"})
	keeper = must(env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(ns).Update(ctx, keeper, metav1.UpdateOptions{}))

	roles := []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "plan-demo-owner-role", Labels: map[string]string{"teardown.dev/owned": "true"}, Annotations: linkTo(owner)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plan-demo-namespace-role", OwnerReferences: []metav1.OwnerReference{ownerRef("v1", "Namespace", ns, nsObj.UID)}}},
	}
	for _, r := range roles {
		must(kube.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}))
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), r.Name, metav1.DeleteOptions{})
		})
	}
	for name, w := range map[string]*unstructured.Unstructured{"linked": owner, "kept": keeper} {
		must(kube.CoreV1().ConfigMaps(elsewhere).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"teardown.dev/owned": "true"}, Annotations: linkTo(w),
		}}, metav1.CreateOptions{}))
	}
	secret := must(kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:        "sh.helm.release.v1.myfoo.v1",
		Labels:      map[string]string{"teardown.dev/lien": "true"},
		Annotations: map[string]string{"teardown.dev/liens": `[{"lien":"plan-demo/keep-release","reason":"release record needed to uninstall myfoo cleanly"}]`},
	}}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_, _ = kube.CoreV1().Secrets(ns).Patch(context.WithoutCancel(ctx), secret.Name, types.MergePatchType, []byte(`{"metadata":{"labels":null}}`), metav1.PatchOptions{})
	})

	for _, format := range []string{"tree", "json", "mermaid", "dot"} {
		code, out, _ := env.Run(t, "plan", "namespace/"+ns, "-o", format)
		if code != cmdutil.ExitFinding {
			t.Errorf("-o %s: exit code %d, want %d (the lien blocks)", format, code, cmdutil.ExitFinding)
		}
		golden(t, "namespace."+format+".golden", out)
	}

	// Nothing was deleted.
	if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("the plan touched the namespace: %v", err)
	}
	if n := must(kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})); n.DeletionTimestamp != nil {
		t.Errorf("the plan deleted the namespace")
	}

	// A Deployment: orphan and foreground change what goes and when.
	code, out, _ := env.Run(t, "plan", "deployment.apps/web", "-n", ns, "--cascade=orphan")
	if code != cmdutil.ExitOK || !strings.Contains(out, "replicaset.apps/web-5d8f (ownerReference)  orphan   --cascade=orphan: its ownerReference is removed") {
		t.Errorf("--cascade=orphan: exit %d", code)
	}
	code, out, _ = env.Run(t, "plan", "deploy", "web", "-n", ns, "--cascade=foreground")
	if code != cmdutil.ExitOK || !strings.Contains(out, "1. "+ns+"/pod/web-5d8f-x2x\n  2. "+ns+"/replicaset.apps/web-5d8f\n  3. "+ns+"/deployment.apps/web") {
		t.Errorf("--cascade=foreground: exit %d, order wrong", code)
	}
	code, out, _ = env.Run(t, "plan", "deploy", "web", "-n", ns)
	if code != cmdutil.ExitOK || !strings.Contains(out, "1. "+ns+"/deployment.apps/web\n  2. "+ns+"/replicaset.apps/web-5d8f\n  3. "+ns+"/pod/web-5d8f-x2x") {
		t.Errorf("background: exit %d, order wrong", code)
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"unknown kind", []string{"plan", "frobnicator/x"}, cmdutil.ExitUsage, `the server doesn't have a resource type "frobnicator"`},
		{"missing object", []string{"plan", "configmap/nope", "-n", "default"}, cmdutil.ExitFinding, "configmap/nope not found in namespace default"},
		{"no name", []string{"plan", "deploy"}, cmdutil.ExitUsage, `argument "deploy": want KIND/NAME or KIND NAME`},
		{"bad cascade", []string{"plan", "ns/default", "--cascade", "sideways"}, cmdutil.ExitUsage, `--cascade "sideways"`},
		{"bad output", []string{"plan", "ns/default", "-o", "yaml"}, cmdutil.ExitUsage, `invalid argument "yaml" for "-o, --output" flag: want tree, json, dot or mermaid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := env.Run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if !strings.Contains(stderr, tt.inStderr) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("stderr %q, want one line containing %q", stderr, tt.inStderr)
			}
		})
	}
}
