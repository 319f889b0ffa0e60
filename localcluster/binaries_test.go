package localcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEmbeddedModulesPinTheVersions(t *testing.T) {
	for _, tt := range []struct{ module, require string }{
		{"kube", "k8s.io/kubernetes " + KubernetesVersion},
		{"etcd", "go.etcd.io/etcd/server/v3 " + EtcdVersion},
	} {
		data, err := modules.ReadFile("modules/" + tt.module + ".go.mod")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), tt.require) {
			t.Errorf("modules/%s.go.mod does not require %s", tt.module, tt.require)
		}
		sum, err := modules.ReadFile("modules/" + tt.module + ".go.sum")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(sum), tt.require+" h1:") {
			t.Errorf("modules/%s.go.sum has no hash for %s", tt.module, tt.require)
		}
	}
}

func TestStagingModulesReplacedAtTheMatchingVersion(t *testing.T) {
	data, err := modules.ReadFile("modules/kube.go.mod")
	if err != nil {
		t.Fatal(err)
	}
	staging := "v0." + strings.TrimPrefix(KubernetesVersion, "v1.")
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if lhs, rhs, ok := strings.Cut(line, "=>"); ok {
			n++
			want := strings.TrimSpace(lhs) + " " + staging
			if strings.TrimSpace(rhs) != want {
				t.Errorf("replace %s => %s, want => %s", strings.TrimSpace(lhs), strings.TrimSpace(rhs), want)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d replace directives: k8s.io/kubernetes needs every staging module replaced", n)
	}
}

func TestVersionLDFlags(t *testing.T) {
	got := strings.Fields(versionLDFlags("v1.37.2"))
	want := []string{
		"-X", "k8s.io/component-base/version.gitVersion=v1.37.2",
		"-X", "k8s.io/component-base/version.gitMajor=1",
		"-X", "k8s.io/component-base/version.gitMinor=37",
		"-X", "k8s.io/component-base/version.gitTreeState=clean",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ldflags (-want +got):\n%s", diff)
	}
}

func TestDefaultCacheDirHonoursTEARDOWN_CACHE(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TEARDOWN_CACHE", dir)
	got, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Errorf("DefaultCacheDir() = %q, want %q", got, dir)
	}
	t.Setenv("TEARDOWN_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", dir)
	got, err = DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "/teardown"; got != want {
		t.Errorf("DefaultCacheDir() = %q, want %q", got, want)
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("tail = %q", got)
	}
	if got := tail("a", 5); got != "a" {
		t.Errorf("tail = %q", got)
	}
}
