//go:build integration

package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestALienNotInForceIsNeverSilent runs the block of docs/liens.md "When a
// lien is not in force" as written, as a new user would: teardown
// installed without grants and its controller running, a lien on a Secret
// prints the warning on kubectl apply, shows READY False MissingPermission
// in kubectl get, is explained by teardown why; after install --grant it
// protects the Secret with no other action, and kubectl delete is refused.
func TestALienNotInForceIsNeverSilent(t *testing.T) {
	lines := shellBlock(t, "docs/liens.md", "### When a lien is not in force")
	if err := os.Symlink(filepath.Join(repo, "examples"), filepath.Join(work, "examples")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	run(t, "bin/teardown install")
	_, stop := startController(t, "bin/teardown controller --kubeconfig ~/.kube/config")
	defer func() {
		run(t, "kubectl -n app delete lien keep-s1 --ignore-not-found")
		run(t, "kubectl delete namespace app --ignore-not-found --wait=false")
		run(t, "kubectl wait --for=delete namespace/app --timeout=120s")
		stop()
		run(t, "bin/teardown uninstall")
	}()

	ran := 0
	for _, line := range lines {
		cmd, _, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		switch {
		case strings.HasPrefix(cmd, "kubectl apply -f examples/not-in-force/lien.yaml"):
			out := run(t, line)
			for _, want := range []string{"Warning:", "'teardown-grants-warn'", "may not patch secrets s1 in namespace app",
				"teardown.dev/aggregate-to-controller=true (teardown install --grant secrets)", "lien.teardown.dev/keep-s1 created"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: output lacks %q:\n%s", cmd, want, out)
				}
			}
		case cmd == "kubectl get liens -n app":
			waitFor(t, 60*time.Second, "kubectl get liens to show keep-s1 not ready", func() bool {
				return strings.Contains(fieldsOf(run(t, line), "keep-s1"), "Deny False MissingPermission")
			})
		case cmd == "bin/teardown why secret/s1 -n app":
			out := run(t, line)
			for _, want := range []string{"protection asked for it is not in force", "Lien app/keep-s1 names it but does not protect it",
				"Ready=False, MissingPermission: teardown's controller may not patch secrets in namespace app", "kubectl describe lien keep-s1 -n app"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: output lacks %q:\n%s", cmd, want, out)
				}
			}
		case cmd == "bin/teardown install --grant secrets":
			if out := run(t, line); !strings.Contains(out, "clusterrole/teardown-grants: patch secrets") {
				t.Errorf("%s: does not report the grant:\n%s", cmd, out)
			}
			// Nothing else is done: the grant alone makes the lien protect.
			waitFor(t, 45*time.Second, "the Secret to be protected after the grant", func() bool {
				out, err := command(t.Context(), "kubectl -n app get secret s1 -o jsonpath='{.metadata.labels.teardown\\.dev/lien}'").CombinedOutput()
				return err == nil && string(out) == "true"
			})
			waitFor(t, 30*time.Second, "kubectl get liens to show keep-s1 ready", func() bool {
				return strings.Contains(fieldsOf(run(t, "kubectl get liens -n app"), "keep-s1"), "Deny True Resolved")
			})
		case cmd == "kubectl -n app delete secret s1":
			out, err := command(t.Context(), line).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "protected by teardown lien(s)") || !strings.Contains(string(out), "app/keep-s1") {
				t.Errorf("%s: %v %s; want refused naming the lien", cmd, err, out)
			}
		default:
			run(t, line)
			ran--
		}
		ran++
	}
	if ran != 5 {
		t.Errorf("the block ran %d of the 5 commands this test checks: it changed; check the test against it", ran)
	}
}

// fieldsOf is the row of a kubectl listing whose first column is name,
// its columns joined by single spaces ("" when there is none).
func fieldsOf(listing, name string) string {
	for _, l := range strings.Split(listing, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return strings.Join(f, " ")
		}
	}
	return ""
}
