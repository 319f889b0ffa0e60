//go:build integration

package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestKubectlGetTeardown runs docs/teardown.md's "Seeing plans with
// kubectl" block as written, with the tigera plan of its Examples applied
// as written: `kubectl get teardown NAME` names one plan (the kind's
// singular name, which the category once shadowed), and `kubectl get
// teardown-all` lists every teardown.dev kind. No kind the cluster serves
// is named like the category.
func TestKubectlGetTeardown(t *testing.T) {
	lines := shellBlock(t, "docs/teardown.md", "### Seeing plans with kubectl")
	plan := fencedBlockAfter(t, "docs/teardown.md", "**tigera**", "```yaml")
	run(t, "bin/teardown install")
	defer run(t, "bin/teardown uninstall")
	run(t, "kubectl apply -f - <<'YAML'\n"+plan+"\nYAML")
	defer run(t, "kubectl delete teardown tigera-operator-uninstall --ignore-not-found")

	for _, line := range lines {
		cmd, _, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		out := run(t, cmd)
		var want []string
		switch {
		case cmd == "kubectl get teardowns":
			want = []string{"NAME", "READY", "PHASE", "TRIGGER", "tigera-operator-uninstall"}
		case strings.HasPrefix(cmd, "kubectl get teardown tigera-operator-uninstall"):
			want = []string{"kind: Teardown", "name: tigera-operator-uninstall", "name: delete-installations"}
		case strings.HasPrefix(cmd, "kubectl describe teardown tigera-operator-uninstall"):
			want = []string{"Name:", "tigera-operator-uninstall", "Kind:", "Teardown"}
		case cmd == "kubectl get teardown-all -A":
			want = []string{"teardown.teardown.dev/tigera-operator-uninstall", "trust.teardown.dev/teardown"}
		default:
			t.Fatalf("the block has a line this test does not know: %s", line)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", cmd, w, out)
			}
		}
	}

	// The category names every teardown.dev kind and no kind's name.
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if r.Name == v1alpha1.Category || r.SingularName == v1alpha1.Category || slices.Contains(r.ShortNames, v1alpha1.Category) {
				t.Errorf("%s %s is named like the category %s, which shadows it in kubectl", l.GroupVersion, r.Name, v1alpha1.Category)
			}
			if strings.HasPrefix(l.GroupVersion, v1alpha1.GroupVersion.Group+"/") && !strings.Contains(r.Name, "/") && !slices.Contains(r.Categories, v1alpha1.Category) {
				t.Errorf("%s %s is not in the category %s: %v", l.GroupVersion, r.Name, v1alpha1.Category, r.Categories)
			}
		}
	}
}

// fencedBlockAfter returns the first fenced block opening with fence
// (```yaml) after the first line of file that starts with prefix.
func fencedBlockAfter(t *testing.T, file, prefix, fence string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	found, in := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !found:
			found = strings.HasPrefix(l, prefix)
		case !in && strings.TrimSpace(l) == fence:
			in = true
		case in && strings.TrimSpace(l) == "```":
			return strings.Join(lines, "\n")
		case in:
			lines = append(lines, l)
		}
	}
	t.Fatalf("%s: no %s block after %q", file, fence, prefix)
	return ""
}
