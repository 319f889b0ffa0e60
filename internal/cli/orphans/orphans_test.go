//go:build integration

package orphans_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/cli/orphans"
	"github.com/teardown-dev/teardown/internal/helmcli"
)

// writeChart writes a chart that renders a namespaced ConfigMap and a
// cluster-scoped ClusterRole, as operator charts do.
func writeChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "foo")
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: foo\nversion: 0.1.0\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  level: info
`,
		"templates/clusterrole.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Namespace }}-{{ .Release.Name }}-foo
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
`,
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, out, _ := env.Run(t, args...)
	return code, out
}

func parse(t *testing.T, out string) []orphans.Orphan {
	t.Helper()
	var got struct{ Orphans []orphans.Orphan }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return got.Orphans
}

func find(list []orphans.Orphan, kind, name string) *orphans.Orphan {
	for i := range list {
		if list[i].Kind == kind && list[i].Object.Name == name {
			return &list[i]
		}
	}
	return nil
}

// The leftover of the helm-operator namespace race: a real helm, each of
// helmcli.Versions, installs a chart with a cluster-scoped object into a
// namespace that is then deleted.
func TestOrphansAfterHelmReleaseNamespaceDeleted(t *testing.T) {
	for _, version := range helmcli.Versions {
		t.Run(version, func(t *testing.T) { orphansAfterHelmReleaseNamespaceDeleted(t, helms[version]) })
	}
}

func orphansAfterHelmReleaseNamespaceDeleted(t *testing.T, helm string) {
	const ns = "helm-home"
	ctx := t.Context()
	code, out := run(t, "orphans", "-A", "-o", "json")
	if code != cmdutil.ExitOK || len(parse(t, out)) != 0 {
		t.Fatalf("a fresh cluster has orphans (exit %d):\n%s", code, out)
	}

	env.CreateNamespace(t, ns, nil)
	env.Helm(t, helm, "install", "myfoo", writeChart(t), "-n", ns)
	role := ns + "-myfoo-foo"
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), role, metav1.DeleteOptions{})
	})

	// Installed and recorded: nothing is orphaned.
	code, out = run(t, "orphans", "-A", "-o", "json")
	if code != cmdutil.ExitOK {
		t.Errorf("with the release in place: exit %d, want 0:\n%s", code, out)
	}

	env.DeleteNamespace(t, ns, "")
	doctortest.WaitGone(t, "namespace "+ns, func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
	if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
		t.Fatalf("helm's clusterrole should have been left behind: %v", err)
	}

	code, out = run(t, "orphans", "-A", "-o", "json")
	if code != cmdutil.ExitFinding {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitFinding)
	}
	o := find(parse(t, out), orphans.HelmReleaseGone, role)
	if o == nil {
		t.Fatalf("clusterrole/%s not reported:\n%s", role, out)
	}
	if o.Release != ns+"/myfoo" || o.Object.Kind != "ClusterRole" || o.Object.APIVersion != "rbac.authorization.k8s.io/v1" {
		t.Errorf("reported as %+v", *o)
	}

	code, out = run(t, "orphans")
	if code != cmdutil.ExitFinding {
		t.Errorf("text: exit %d", code)
	}
	for _, want := range []string{
		"Helm release gone (helm uninstall cannot find these)",
		"clusterrole.rbac.authorization.k8s.io/" + role,
		"Helm release helm-home/myfoo: namespace helm-home is gone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// Owners gone: a teardown owner link to a deleted Widget in another
// namespace, a cluster-scoped object with a namespaced owner (which the
// garbage collector never honours), and an object Terminating on a
// finalizer nobody removes.
func TestOrphansOwnersGoneAndStuckFinalizers(t *testing.T) {
	const home, other = "orphans-home", "orphans-other"
	ctx := t.Context()
	env.EnsureWidgetCRD(t)
	env.CreateNamespace(t, home, nil)
	env.CreateNamespace(t, other, nil)
	w := env.CreateWidget(t, home, "owner", "widget-operator")

	owners := `[{"apiVersion":"example.com/v1","kind":"Widget","namespace":"` + home + `","name":"owner","uid":"` + string(w.GetUID()) + `"}]`
	if _, err := env.Kube.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "linked", Labels: map[string]string{"teardown.dev/owned": "true"}, Annotations: map[string]string{"teardown.dev/owners": owners},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:            "orphans-cross-scope",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: w.GetUID()}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), "orphans-cross-scope", metav1.DeleteOptions{})
	})
	stuck := env.CreateWidget(t, other, "stuck", "widget-operator", "example.com/cleanup")

	// While the owner exists, neither dependent is garbage.
	code, out := run(t, "orphans", "-A", "-o", "json")
	if code != cmdutil.ExitOK {
		t.Fatalf("with the owner in place: exit %d\n%s", code, out)
	}

	if err := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(home).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(other).Delete(ctx, stuck.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	doctortest.WaitGone(t, "widget owner", func(ctx context.Context) error {
		_, err := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(home).Get(ctx, "owner", metav1.GetOptions{})
		return err
	})

	code, out = run(t, "orphans", "-A", "-o", "json")
	if code != cmdutil.ExitFinding {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitFinding)
	}
	got := parse(t, out)
	if o := find(got, orphans.TeardownOwnerGone, "linked"); o == nil || !strings.Contains(o.Reason, "teardown owner orphans-home/widget.example.com/owner: it no longer exists") {
		t.Errorf("configmap/linked: %+v", o)
	}
	if o := find(got, orphans.OwnerGone, "orphans-cross-scope"); o == nil || !strings.Contains(o.Reason, "a cluster-scoped object cannot have a namespaced owner") {
		t.Errorf("clusterrole/orphans-cross-scope: %+v", o)
	}
	if o := find(got, orphans.StuckTerminating, "stuck"); o == nil || !strings.Contains(o.Reason, "finalizer example.com/cleanup, set by widget-operator: nobody will remove it") {
		t.Errorf("widget/stuck: %+v", o)
	}

	// Limited to one namespace: cluster-scoped objects and that namespace's.
	code, out = run(t, "orphans", "-n", home, "-o", "json")
	got = parse(t, out)
	if code != cmdutil.ExitFinding || find(got, orphans.OwnerGone, "orphans-cross-scope") == nil || find(got, orphans.TeardownOwnerGone, "linked") != nil {
		t.Errorf("-n %s: exit %d, %+v", home, code, got)
	}
}

func TestOrphansErrors(t *testing.T) {
	code, _, stderr := env.Run(t, "orphans", "extra")
	if code != cmdutil.ExitUsage || !strings.Contains(stderr, "unknown command") && !strings.Contains(stderr, "accepts 0 arg") {
		t.Errorf("extra argument: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = env.Run(t, "orphans", "-o", "dot")
	if code != cmdutil.ExitUsage || !strings.Contains(stderr, `invalid argument "dot" for "-o, --output" flag: want text or json`) {
		t.Errorf("bad output: exit %d, stderr %q", code, stderr)
	}
}
