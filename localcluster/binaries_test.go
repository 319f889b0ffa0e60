package localcluster

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVersionsAreThePinnedDirectories(t *testing.T) {
	got, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	want := []Version{
		{Kubernetes: "v1.30.14", Etcd: "v3.5.24"},
		{Kubernetes: "v1.35.4", Etcd: "v3.6.16"},
		{Kubernetes: KubernetesVersion, Etcd: EtcdVersion},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Versions() (-want +got):\n%s", diff)
	}
}

func TestEmbeddedModulesPinTheVersions(t *testing.T) {
	versions, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		for _, tt := range []struct{ module, require string }{
			{"kube", "k8s.io/kubernetes " + v.Kubernetes},
			{"etcd", "go.etcd.io/etcd/server/v3 " + v.Etcd},
		} {
			data, err := pins(v, tt.module+".go.mod")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.require) {
				t.Errorf("modules/%s/%s.go.mod does not require %s", v.Kubernetes, tt.module, tt.require)
			}
			sum, err := pins(v, tt.module+".go.sum")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(sum), tt.require+" h1:") {
				t.Errorf("modules/%s/%s.go.sum has no hash for %s", v.Kubernetes, tt.module, tt.require)
			}
		}
	}
}

func TestStagingModulesReplacedAtTheMatchingVersion(t *testing.T) {
	versions, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		data, err := pins(v, "kube.go.mod")
		if err != nil {
			t.Fatal(err)
		}
		staging := "v0." + strings.TrimPrefix(v.Kubernetes, "v1.")
		n := 0
		for _, line := range strings.Split(string(data), "\n") {
			if lhs, rhs, ok := strings.Cut(line, "=>"); ok {
				n++
				want := strings.TrimSpace(lhs) + " " + staging
				if strings.TrimSpace(rhs) != want {
					t.Errorf("%s: replace %s => %s, want => %s", v.Kubernetes, strings.TrimSpace(lhs), strings.TrimSpace(rhs), want)
				}
			}
		}
		if n < 20 {
			t.Errorf("%s: only %d replace directives: k8s.io/kubernetes needs every staging module replaced", v.Kubernetes, n)
		}
	}
}

func TestSelectedVersion(t *testing.T) {
	for _, tt := range []struct {
		env     string
		want    Version
		wantErr []string // substrings of the error
	}{
		{env: "", want: Version{Kubernetes: KubernetesVersion, Etcd: EtcdVersion}},
		{env: "v1.30.14", want: Version{Kubernetes: "v1.30.14", Etcd: "v3.5.24"}},
		{env: " v1.37.2 ", want: Version{Kubernetes: "v1.37.2", Etcd: "v3.6.16"}},
		{env: "v1.29.0", wantErr: []string{"TEARDOWN_KUBERNETES_VERSION=v1.29.0", `no module pins for Kubernetes "v1.29.0"`, "it builds v1.30.14, v1.35.4, v1.37.2", "hack/update-localcluster-modules.sh"}},
		{env: "1.30.14", wantErr: []string{"TEARDOWN_KUBERNETES_VERSION=1.30.14", "it builds v1.30.14, v1.35.4, v1.37.2"}},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(VersionEnv, tt.env)
			got, err := SelectedVersion()
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("SelectedVersion() = %v, want an error", got)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SelectedVersion() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEachVersionIsCachedApart(t *testing.T) {
	versions, err := Versions()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	seen := map[string]string{}
	for _, v := range versions {
		dir, err := versionCacheDir(t.Context(), v, cache)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != filepath.Join(cache, "localcluster") {
			t.Errorf("%s is cached in %s, want a directory of %s/localcluster", v.Kubernetes, dir, cache)
		}
		if other, ok := seen[dir]; ok {
			t.Errorf("%s and %s share the cache directory %s", other, v.Kubernetes, dir)
		}
		seen[dir] = v.Kubernetes
		again, err := versionCacheDir(t.Context(), v, cache)
		if err != nil {
			t.Fatal(err)
		}
		if again != dir {
			t.Errorf("%s: cache directory %s, then %s: the key must be stable", v.Kubernetes, dir, again)
		}
	}
}

func TestCacheKeyFollowsPinsGoAndLDFlags(t *testing.T) {
	v, err := LookupVersion(KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	base, err := buildKey(v, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := buildKey(v, "go1.27.3"); other == base {
		t.Errorf("key %s does not change with the Go version", base)
	}
	old, err := LookupVersion("v1.30.14")
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := buildKey(old, "go1.26.8"); other == base {
		t.Errorf("v1.30.14 and %s share the key %s", KubernetesVersion, base)
	}
}

func TestEnsureBinariesRefusesAnUnknownVersion(t *testing.T) {
	t.Setenv(VersionEnv, "v1.29.0")
	cache := t.TempDir()
	_, err := EnsureBinaries(t.Context(), cache, nil)
	if err == nil || !strings.Contains(err.Error(), VersionEnv) {
		t.Fatalf("EnsureBinaries with %s=v1.29.0: err %v, want one naming %s", VersionEnv, err, VersionEnv)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("the cache got %d entries for a version it cannot build", len(entries))
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

// GoBuild builds and reports what go printed besides package names when
// the build fails.
func TestGoBuild(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/hello\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() {}\n")
	build := func() error {
		return GoBuild{
			Label: "hello: building", Dir: dir, Env: []string{"GOFLAGS=-mod=mod", "GOPROXY=off"},
			Out: filepath.Join(dir, "hello"), Packages: []string{"."},
		}.Run(t.Context(), io.Discard)
	}
	if err := build(); err != nil {
		t.Fatalf("building a module that compiles: %v", err)
	}
	write("main.go", "package main\n\nfunc main() { undefinedThing() }\n")
	if err := build(); err == nil || !strings.Contains(err.Error(), "undefined: undefinedThing") {
		t.Errorf("building a module that does not compile: %v, want go's message", err)
	}
}

// BuildOnce builds only what is not built yet, and says whether it built.
func TestBuildOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	bin := filepath.Join(dir, "bin")
	built := func() bool { _, err := os.Stat(bin); return err == nil }
	calls := 0
	build := func() error { calls++; return os.WriteFile(bin, nil, 0o644) }
	for i, want := range []bool{true, false} {
		did, err := BuildOnce(t.Context(), dir, "test", io.Discard, built, build)
		if err != nil || did != want || calls != 1 {
			t.Errorf("call %d: built %v, error %v, %d builds; want built %v, one build", i+1, did, err, calls, want)
		}
	}
}
