//go:build integration

package docs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/localcluster"
)

// syncBuffer is a bytes.Buffer a process writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInstallingOnACluster runs the README's "Installing on a cluster"
// block as written, with ~/.kube/config pointing at the local control
// plane and the controller started from it as the cluster admin, as a new
// user would: install, the controller from the kubeconfig, then a
// namespace race (a lien whose holder the namespace deletion removes: the
// controller must be trusted to release it, or the namespace hangs), then
// uninstall.
func TestInstallingOnACluster(t *testing.T) {
	lines := shellBlock(t, "README.md", "## Installing on a cluster")
	ran := map[string]bool{}
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // a comment going on from the line above
		}
		verb := strings.Fields(line)[1]
		if strings.HasPrefix(line, "kubectl ") {
			verb = "kubectl"
		}
		switch verb {
		case "kubectl":
			run(t, line)
		case "install":
			out := run(t, line)
			if strings.Contains(line, "--dry-run") {
				for _, want := range []string{"kind: CustomResourceDefinition", "kind: ValidatingAdmissionPolicy", "kind: Trust"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s: output lacks %q", line, want)
					}
				}
				break
			}
			wants := []string{"lien policy enforced", "the lien policies trust users system:serviceaccount:teardown-system:teardown-controller"}
			if strings.Contains(line, "--grant secrets") {
				wants = append(wants, "clusterrole/teardown-grants: patch secrets")
			}
			for _, want := range wants {
				if !strings.Contains(out, want) {
					t.Errorf("%s: output lacks %q:\n%s", line, want, out)
				}
			}
		case "controller":
			log, stop := startController(t, line)
			want := "acting as system:serviceaccount:teardown-system:teardown-controller (impersonated by teardown:admin)"
			if !strings.Contains(log.String(), want) {
				t.Errorf("the controller's log lacks %q:\n%s", want, log.String())
			}
			namespaceRace(t)
			stop()
		case "uninstall":
			run(t, line)
			out := run(t, "kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings -o name")
			if strings.Contains(out, "teardown-") {
				t.Errorf("after %s, policies remain:\n%s", line, out)
			}
		default:
			t.Fatalf("the README's install block has a line this test does not know: %s", line)
		}
		ran[verb] = true
	}
	for _, verb := range []string{"install", "controller", "uninstall"} {
		if !ran[verb] {
			t.Errorf("the README's install block no longer runs teardown %s", verb)
		}
	}
}

// startController starts line, a `teardown controller` command, and
// returns once the controller says whom it acts as; stop ends it.
func startController(t *testing.T, line string) (log *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := command(ctx, line)
	log = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, 60*time.Second, "the controller to say who it acts as", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("%s exited: %v\n%s", line, err, log.String())
		default:
		}
		return strings.Contains(log.String(), "acting as")
	})
	return log, func() {
		cancel()
		<-exited
	}
}

// namespaceRace is problem 1 with kubectl alone: a lien keeps a Secret
// while a ConfigMap exists; deleting the namespace deletes the ConfigMap,
// the controller releases the lien, and the namespace finishes.
func namespaceRace(t *testing.T) {
	t.Helper()
	run(t, "kubectl create namespace race")
	run(t, "kubectl -n race create secret generic release")
	run(t, "kubectl -n race create configmap holder")
	run(t, `kubectl apply -f - <<'YAML'
apiVersion: teardown.dev/v1alpha1
kind: Lien
metadata: {name: keep-release, namespace: race}
spec:
  protect: [{apiVersion: v1, kind: Secret, name: release}]
  heldBy:  [{apiVersion: v1, kind: ConfigMap, name: holder}]
  reason: needed while holder exists
YAML`)
	waitFor(t, 60*time.Second, "the Secret to be protected", func() bool {
		out, err := command(t.Context(), "kubectl -n race get secret release -o jsonpath='{.metadata.labels.teardown\\.dev/lien}'").CombinedOutput()
		return err == nil && string(out) == "true"
	})
	out, err := command(t.Context(), "kubectl -n race delete secret release").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "teardown lien") {
		t.Errorf("deleting the protected Secret: %v %s; want refused naming the lien", err, out)
	}
	run(t, "kubectl delete namespace race --wait=false")
	run(t, "kubectl wait --for=delete namespace/race --timeout=120s")
}

// TestLocalControlPlane runs the README's "The local control plane" block
// as one shell script (its eval carries KUBECONFIG to the next lines), on a
// state directory of its own; the binaries come from the shared cache.
func TestLocalControlPlane(t *testing.T) {
	lines := shellBlock(t, "README.md", "## The local control plane")
	cache := sharedBinaries(t)
	out := run(t, strings.Join(lines, "\n"), "TEARDOWN_CACHE="+cache)
	for _, want := range []string{"kube-system", "kube-public", "default"} {
		if !strings.Contains(out, want) {
			t.Errorf("the block's kubectl get ns lacks %q:\n%s", want, out)
		}
	}
	// down: nothing keeps running, and env has nothing to point at.
	if out, err := command(t.Context(), "bin/teardown local env", "TEARDOWN_CACHE="+cache).CombinedOutput(); err == nil {
		t.Errorf("after local down, local env still answers: %s", out)
	}
}

// TestServingAServiceByHand runs docs/localcluster.md's "Serving a Service
// from a local server" block as one script, on a cluster of its own: up
// with a served Service and a kube-apiserver flag, serve another, list,
// unserve, down.
func TestServingAServiceByHand(t *testing.T) {
	lines := shellBlock(t, "docs/localcluster.md", "### Serving a Service from a local server")
	cache := sharedBinaries(t)
	// Before down, the script also keeps what the components were started with.
	script := strings.Join(lines[:len(lines)-1], "\n") + "\ncat \"$TEARDOWN_CACHE/local/state.json\"\n" + lines[len(lines)-1]
	out := run(t, script, "TEARDOWN_CACHE="+cache)
	for _, want := range []string{
		"serving Service webhooks/guard:443 -> 127.0.0.1:9443",
		"serving Service webhooks/metrics:443 -> 127.0.0.1:9444",
		"webhooks/guard:443 -> 127.0.0.1:9443\nwebhooks/metrics:443 -> 127.0.0.1:9444\n", // the list
		"no longer serving Service webhooks/guard:443",
		`"--v=1"`, // kube-apiserver's command line
		`"name": "egress-proxy"`,
		"local control plane stopped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the block's output lacks %q:\n%s", want, out)
		}
	}
}

// sharedBinaries is a cache directory of the test's own (so that `local
// up` starts a cluster apart from any other) holding the shared cache's
// control-plane binaries.
func sharedBinaries(t *testing.T) string {
	t.Helper()
	shared, err := localcluster.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, "localcluster"), filepath.Join(cache, "localcluster")); err != nil {
		t.Fatal(err)
	}
	return cache
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
