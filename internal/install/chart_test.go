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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/pkg/lien"
)

var (
	cluster *localcluster.Cluster
	helm    string
)

func TestMain(m *testing.M) {
	code := func() int {
		cache, err := localcluster.DefaultCacheDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if helm, err = doctortest.EnsureHelm(context.Background(), cache); err != nil {
			fmt.Fprintln(os.Stderr, "building helm:", err)
			return 1
		}
		if cluster, err = localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cluster.Stop()
		return m.Run()
	}()
	os.Exit(code)
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

// TestThreeInstallPathsProduceTheSameObjects compares `teardown install
// --dry-run`, the Helm chart and kustomize's config/default, object by
// object. Only the Namespace differs: Helm's --create-namespace owns it.
func TestThreeInstallPathsProduceTheSameObjects(t *testing.T) {
	want := installed(t, "teardown:test")
	withoutNamespace := map[string]map[string]any{}
	for k, v := range want {
		if !strings.HasPrefix(k, "Namespace/") {
			withoutNamespace[k] = v
		}
	}
	chart := decode(t, run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace, "--include-crds", "--set", "image.tag=test"))
	if diff := cmp.Diff(withoutNamespace, chart); diff != "" {
		t.Errorf("helm template differs from teardown install (-install +helm):\n%s", diff)
	}
	kustomized := decode(t, run(t, nil, "kubectl", "kustomize", "config/default"))
	if diff := cmp.Diff(installed(t, "teardown:latest"), kustomized); diff != "" {
		t.Errorf("kubectl kustomize config/default differs from teardown install (-install +kustomize):\n%s", diff)
	}
}

// TestChartInstallsEnforcesAndUninstallsClean installs the chart with a
// real helm, checks the lien policy is enforced, uninstalls it, and checks
// that a lien-labelled object is deletable again.
func TestChartInstallsEnforcesAndUninstallsClean(t *testing.T) {
	ctx := context.Background()
	kubeconfig := cluster.KubeconfigPath()
	rendered := run(t, nil, helm, "template", "teardown", "charts/teardown", "-n", install.Namespace, "--include-crds")
	run(t, strings.NewReader(rendered), "kubectl", "--kubeconfig", kubeconfig, "create", "namespace", install.Namespace)
	run(t, strings.NewReader(rendered), "kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-")
	run(t, nil, helm, "--kubeconfig", kubeconfig, "install", "teardown", "charts/teardown", "-n", install.Namespace)

	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	kept, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "kept-", Labels: map[string]string{lien.Label: lien.LabelDeny},
		Annotations: map[string]string{lien.Annotation: `[{"lien":"default/test","reason":"chart test"}]`},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(cms.Delete(ctx, kept.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})), nil
	})
	if err != nil {
		t.Fatalf("the chart's lien policy was never enforced: %v", err)
	}

	run(t, nil, helm, "--kubeconfig", kubeconfig, "uninstall", "teardown", "-n", install.Namespace, "--wait")
	for _, name := range []string{"teardown-lien-deny", "teardown-lien-tamper"} {
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("policy %s after helm uninstall: %v, want NotFound", name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return cms.Delete(ctx, kept.Name, metav1.DeleteOptions{}) == nil, nil
	})
	if err != nil {
		t.Errorf("a lien-labelled object should be deletable once the chart is uninstalled: %v", err)
	}
}
