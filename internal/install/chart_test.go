//go:build integration

package install_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	cluster *localcluster.Cluster
	// helms are the real helm clients, one of each of helmcli.Versions,
	// built once into the cache.
	helms map[string]string
)

func TestMain(m *testing.M) {
	cache, err := localcluster.DefaultCacheDir()
	if err == nil {
		helms, err = doctortest.EnsureHelms(context.Background(), cache)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building helm:", err)
		os.Exit(1)
	}
	testenv.ClusterMain(m, func(c *localcluster.Cluster) { cluster = c })
}

// repoRoot is the checkout this test file lives in.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func run(t *testing.T, stdin io.Reader, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// decode parses a YAML stream into objects keyed kind/namespace/name.
func decode(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u.Object
	}
}

// withoutKind drops the documents of one kind from a YAML stream.
func withoutKind(stream, kind string) string {
	var kept []string
	for _, doc := range strings.Split(stream, "\n---\n") {
		if !strings.Contains("\n"+doc+"\n", "\nkind: "+kind+"\n") {
			kept = append(kept, doc)
		}
	}
	return strings.Join(kept, "\n---\n")
}

func installed(t *testing.T, image string) map[string]map[string]any {
	t.Helper()
	objs, err := install.Objects(install.Options{ControllerImage: image})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := install.Render(&b, objs); err != nil {
		t.Fatal(err)
	}
	return decode(t, b.String())
}

// eachHelm runs test once per helmcli.Versions, in a subtest named after
// the version, with that helm.
func eachHelm(t *testing.T, test func(t *testing.T, helm string)) {
	for _, version := range helmcli.Versions {
		t.Run(version, func(t *testing.T) { test(t, helms[version]) })
	}
}

// TestThreeInstallPathsProduceTheSameObjects compares `teardown install
// --dry-run`, the Helm chart (rendered by each of helmcli.Versions) and
// kustomize's config/default, object by object. Only the Namespace
// differs: Helm's --create-namespace owns it; and the chart's uninstall
// hook is left out of the comparison.
func TestThreeInstallPathsProduceTheSameObjects(t *testing.T) {
	eachHelm(t, threeInstallPathsProduceTheSameObjects)
}

func threeInstallPathsProduceTheSameObjects(t *testing.T, helm string) {
	want := installed(t, "teardown:test")
	withoutNamespace := map[string]map[string]any{}
	for k, v := range want {
		if !strings.HasPrefix(k, "Namespace/") {
			withoutNamespace[k] = v
		}
	}
	chart := decode(t, run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace, "--include-crds", "--set", "image.tag=test"))
	// The pre-delete hook's Job and RBAC (annotation helm.sh/hook) exist
	// only while helm uninstall runs them: they are not installed objects.
	for k, obj := range chart {
		if _, hook := (&unstructured.Unstructured{Object: obj}).GetAnnotations()["helm.sh/hook"]; hook {
			delete(chart, k)
		}
	}
	if diff := cmp.Diff(withoutNamespace, chart); diff != "" {
		t.Errorf("helm template differs from teardown install (-install +helm):\n%s", diff)
	}
	kustomized := decode(t, run(t, nil, "kubectl", "kustomize", "config/default"))
	if diff := cmp.Diff(installed(t, "teardown:latest"), kustomized); diff != "" {
		t.Errorf("kubectl kustomize config/default differs from teardown install (-install +kustomize):\n%s", diff)
	}
}

// TestGrantsAreTheSameOnEveryPath compares the ClusterRole of `teardown
// install --grant secrets,configmaps,example.com/foos`, of the chart with
// those grants in its values, and of the kustomize example
// examples/kustomize-grants; and what each path renders besides it is what
// it renders without grants. The chart is rendered by each of
// helmcli.Versions.
func TestGrantsAreTheSameOnEveryPath(t *testing.T) {
	eachHelm(t, grantsAreTheSameOnEveryPath)
}

func grantsAreTheSameOnEveryPath(t *testing.T, helm string) {
	objs, err := install.Objects(install.Options{Grants: install.Grants{Patch: []string{"secrets", "configmaps", "example.com/foos"}}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := install.Render(&b, objs); err != nil {
		t.Fatal(err)
	}
	key := "ClusterRole//" + install.GrantsRole
	want := decode(t, b.String())[key]
	if want == nil {
		t.Fatalf("teardown install --grant renders no %s", key)
	}
	chart := decode(t, run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace,
		"--set", "grants.patch={secrets,configmaps,example.com/foos}"))
	if diff := cmp.Diff(want, chart[key]); diff != "" {
		t.Errorf("the chart's %s differs from teardown install --grant (-install +helm):\n%s", key, diff)
	}
	if _, ok := decode(t, run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace))[key]; ok {
		t.Errorf("the chart renders %s without grants in its values", key)
	}
	kustomized := decode(t, run(t, nil, "kubectl", "kustomize", "examples/kustomize-grants"))
	if diff := cmp.Diff(want, kustomized[key]); diff != "" {
		t.Errorf("examples/kustomize-grants' %s differs from teardown install --grant (-install +kustomize):\n%s", key, diff)
	}
	delete(kustomized, key)
	if diff := cmp.Diff(installed(t, "teardown:latest"), kustomized); diff != "" {
		t.Errorf("examples/kustomize-grants besides %s differs from config/default (-install +kustomize):\n%s", key, diff)
	}
}

// TestChartInstallsEnforcesAndUninstallsClean installs the chart with a
// real helm, each of helmcli.Versions, checks the lien policy is enforced,
// and uninstalls it. The local control plane runs no kubelet, so the test
// plays the pre-delete hook's Job: it runs `teardown uninstall --policies-only` as the Job's
// service account (so the hook's RBAC is what is tested) and reports the
// Job complete. When the hook is done, the policies are gone and a
// lien-labelled object is deletable while the rest of the chart (the
// Deployment, the policy parameters) is still there: Helm deletes that
// only after the hook.
func TestChartInstallsEnforcesAndUninstallsClean(t *testing.T) {
	eachHelm(t, chartInstallsEnforcesAndUninstallsClean)
}

func chartInstallsEnforcesAndUninstallsClean(t *testing.T, helm string) {
	ctx := t.Context()
	kubeconfig := cluster.KubeconfigPath()
	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	rendered := run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace, "--include-crds")
	// helm uninstall leaves the namespace (it did not create it): the
	// next version's run finds it.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: install.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A server-side dry run cannot know the Trust before its CRD exists
	// (helm install applies crds/ first): every other object is checked.
	run(t, strings.NewReader(withoutKind(rendered, "Trust")), "kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-")
	run(t, nil, helm, "--kubeconfig", kubeconfig, "install", "teardown", "charts/teardown", "-n", install.Namespace)

	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	kept, dryRunDelete := keptConfigMap(t, cs)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(dryRunDelete()), nil
	})
	if err != nil {
		t.Fatalf("the chart's lien policy was never enforced: %v", err)
	}

	waitUninstalled := doctortest.HelmUninstall(t, helm, kubeconfig, "teardown", install.Namespace)

	// The hook Job appears: run what it would run.
	jobs := cs.BatchV1().Jobs(install.Namespace)
	var job *batchv1.Job
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err = jobs.Get(ctx, "teardown-uninstall", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the pre-delete hook Job never appeared: %v", err)
	}
	container := job.Spec.Template.Spec.Containers[0]
	if want := []string{"uninstall", "--policies-only", "--namespace", install.Namespace}; !slices.Equal(container.Args, want) {
		t.Fatalf("the hook Job runs %v, want %v", container.Args, want)
	}
	sa := "system:serviceaccount:" + install.Namespace + ":" + job.Spec.Template.Spec.ServiceAccountName
	args := append(slices.Clone(container.Args), "--as", sa, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated")
	if code, _, _ := teardown(t, args...); code != cmdutil.ExitOK {
		t.Fatalf("teardown %s as the hook's service account: exit %d", strings.Join(container.Args, " "), code)
	}
	if live := livePolicies(ctx, cs); len(live) > 0 {
		t.Errorf("after the hook, still there: %v", live)
	}
	if err := dryRunDelete(); err != nil {
		t.Errorf("deleting a lien-labelled object once the hook ran: %v, want allowed", err)
	}
	if _, err := cs.AppsV1().Deployments(install.Namespace).Get(ctx, "teardown-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("the Deployment should outlive the hook (Helm deletes it after): %v", err)
	}
	if _, err := install.ReadTrust(ctx, cluster.RESTConfig()); err != nil {
		t.Errorf("the Trust teardown should outlive the hook (Helm deletes it after): %v", err)
	}
	if err := doctortest.CompleteJob(ctx, jobs, job); err != nil {
		t.Fatal(err)
	}

	waitUninstalled()
	if _, err := cs.AppsV1().Deployments(install.Namespace).Get(ctx, "teardown-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment after helm uninstall: %v, want NotFound", err)
	}
	if _, err := jobs.Get(ctx, "teardown-uninstall", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the hook Job after helm uninstall: %v, want NotFound (hook-delete-policy hook-succeeded)", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "teardown-uninstall", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the hook's ClusterRole after helm uninstall: %v, want NotFound (hook-delete-policy hook-succeeded)", err)
	}
	if err := cms.Delete(ctx, kept.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("a lien-labelled object should be deletable once the chart is uninstalled: %v", err)
	}
}
