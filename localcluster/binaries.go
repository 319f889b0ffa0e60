package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// KubernetesVersion is the version of kube-apiserver and kube-controller-manager
// that the local control plane builds and runs unless VersionEnv names another.
const KubernetesVersion = "v1.37.2"

// EtcdVersion is the version of etcd that goes with KubernetesVersion.
const EtcdVersion = "v3.6.16"

// VersionEnv is the environment variable that chooses the Kubernetes version
// the local control plane builds and runs, one of Versions().
const VersionEnv = "TEARDOWN_KUBERNETES_VERSION"

// modules holds, for each version under modules/<version>/, the go.mod and
// go.sum of the two modules the binaries are built from (written by
// hack/update-localcluster-modules.sh). They cannot be real nested modules: a
// module's zip and go:embed both leave nested modules out, and library users
// fetch this module as a zip.
//
//go:embed modules
var modules embed.FS

// Version is one Kubernetes version the local control plane can be built at,
// with the etcd version it runs with.
type Version struct {
	Kubernetes string // k8s.io/kubernetes version, e.g. v1.37.2
	Etcd       string // go.etcd.io/etcd/server/v3 version
}

// Versions are the versions there are module pins for, oldest first.
func Versions() ([]Version, error) {
	entries, err := fs.ReadDir(modules, "modules")
	if err != nil {
		return nil, fmt.Errorf("reading the embedded module pins: %w", err)
	}
	var out []Version
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		etcd, err := etcdVersion(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Version{Kubernetes: e.Name(), Etcd: etcd})
	}
	sort.Slice(out, func(i, j int) bool { return versionLess(out[i].Kubernetes, out[j].Kubernetes) })
	return out, nil
}

// etcdVersion is the etcd version the pins of one Kubernetes version require.
func etcdVersion(kube string) (string, error) {
	data, err := modules.ReadFile(path.Join("modules", kube, "etcd.go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading the etcd pins of %s: %w", kube, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == etcdServerModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("modules/%s/etcd.go.mod does not require %s", kube, etcdServerModule)
}

const etcdServerModule = "go.etcd.io/etcd/server/v3"

// versionLess orders vMAJOR.MINOR.PATCH versions numerically.
func versionLess(a, b string) bool {
	pa, pb := versionNumbers(a), versionNumbers(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return a < b
}

func versionNumbers(v string) [3]int {
	var n [3]int
	for i, part := range strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3) {
		n[i], _ = strconv.Atoi(part)
	}
	return n
}

// LookupVersion returns the Version of a Kubernetes version there are pins
// for; any other is an error that names VersionEnv and the known versions.
func LookupVersion(kube string) (Version, error) {
	all, err := Versions()
	if err != nil {
		return Version{}, err
	}
	known := make([]string, 0, len(all))
	for _, v := range all {
		if v.Kubernetes == kube {
			return v, nil
		}
		known = append(known, v.Kubernetes)
	}
	return Version{}, fmt.Errorf("%s=%s: localcluster has no module pins for Kubernetes %q; it builds %s "+
		"(pins for another version come from hack/update-localcluster-modules.sh KUBERNETES_VERSION ETCD_VERSION)",
		VersionEnv, kube, kube, strings.Join(known, ", "))
}

// SelectedVersion is the version $TEARDOWN_KUBERNETES_VERSION names, or
// KubernetesVersion when it is unset or empty.
func SelectedVersion() (Version, error) {
	kube := strings.TrimSpace(os.Getenv(VersionEnv))
	if kube == "" {
		kube = KubernetesVersion
	}
	return LookupVersion(kube)
}

// Binaries are the paths of the built control-plane programs.
type Binaries struct {
	Version           Version // what they were built at
	Etcd              string
	APIServer         string
	ControllerManager string
}

func (b Binaries) all() []string { return []string{b.Etcd, b.APIServer, b.ControllerManager} }

// buildUnit is one module built in one `go build`.
type buildUnit struct {
	module   string   // name under modules/<version>/, without .go.mod
	what     string   // for progress lines
	packages []string // main packages
	outputs  []string // binary names, one per package
	ldflags  string
}

// buildUnits are what one version is built from; the order is part of the
// cache key.
func buildUnits(v Version) []buildUnit {
	return []buildUnit{
		{
			module:   "etcd",
			what:     "etcd " + v.Etcd,
			packages: []string{etcdServerModule},
			outputs:  []string{"etcd"},
		},
		{
			module:   "kube",
			what:     "kube-apiserver and kube-controller-manager " + v.Kubernetes,
			packages: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager"},
			outputs:  []string{"kube-apiserver", "kube-controller-manager"},
			ldflags:  versionLDFlags(v.Kubernetes),
		},
	}
}

// pins reads one of a version's embedded module files, e.g. "kube.go.sum".
func pins(v Version, name string) ([]byte, error) {
	return modules.ReadFile(path.Join("modules", v.Kubernetes, name))
}

// versionLDFlags sets what `kubectl version` reads; without it the server
// reports v0.0.0-master+$Format:%H$, which clients cannot parse.
func versionLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	const pkg = "k8s.io/component-base/version"
	return strings.Join([]string{
		"-X " + pkg + ".gitVersion=" + version,
		"-X " + pkg + ".gitMajor=" + major,
		"-X " + pkg + ".gitMinor=" + minor,
		"-X " + pkg + ".gitTreeState=clean",
	}, " ")
}

// DefaultCacheDir is where binaries are cached when Options.CacheDir is empty:
// $TEARDOWN_CACHE if set, else teardown/ under the user's cache directory.
func DefaultCacheDir() (string, error) {
	if dir := os.Getenv("TEARDOWN_CACHE"); dir != "" {
		return filepath.Abs(dir)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory (set TEARDOWN_CACHE): %w", err)
	}
	return filepath.Join(dir, "teardown"), nil
}

// EnsureBinaries returns the cached control-plane binaries of the version
// SelectedVersion names ($TEARDOWN_KUBERNETES_VERSION, else
// KubernetesVersion), building them first if needed: see EnsureVersionBinaries.
func EnsureBinaries(ctx context.Context, cacheDir string, progress io.Writer) (Binaries, error) {
	v, err := SelectedVersion()
	if err != nil {
		return Binaries{}, err
	}
	return EnsureVersionBinaries(ctx, v, cacheDir, progress)
}

// EnsureVersionBinaries returns the cached control-plane binaries of one
// version, building them first if this cache has none for its pins and the
// go command in use. Each version is cached in its own directory. Builds are
// serialized across processes by a lock file, so test packages that start at
// once build only once. Progress goes to progress.
func EnsureVersionBinaries(ctx context.Context, v Version, cacheDir string, progress io.Writer) (Binaries, error) {
	if progress == nil {
		progress = io.Discard
	}
	root, err := versionCacheDir(ctx, v, cacheDir)
	if err != nil {
		return Binaries{}, err
	}
	bin := filepath.Join(root, "bin")
	bins := Binaries{
		Version:           v,
		Etcd:              filepath.Join(bin, "etcd"),
		APIServer:         filepath.Join(bin, "kube-apiserver"),
		ControllerManager: filepath.Join(bin, "kube-controller-manager"),
	}
	_, err = BuildOnce(ctx, root, "localcluster", progress, func() bool { return allExist(bins.all()) }, func() error {
		fmt.Fprintf(progress, "localcluster: building the control plane at Kubernetes %s into %s (once per version; about 13 minutes cold, seconds from then on)\n", v.Kubernetes, bin)
		started := time.Now()
		for _, u := range buildUnits(v) {
			if err := u.build(ctx, v, root, bin, progress); err != nil {
				return err
			}
		}
		fmt.Fprintf(progress, "localcluster: control plane built in %s\n", time.Since(started).Round(time.Second))
		return nil
	})
	if err != nil {
		return Binaries{}, err
	}
	return bins, nil
}

// versionCacheDir is where one version's binaries are cached:
// localcluster/<key> under cacheDir.
func versionCacheDir(ctx context.Context, v Version, cacheDir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("running `go env GOVERSION` (the local control plane is built with the go command): %w", err)
	}
	key, err := buildKey(v, string(bytes.TrimSpace(out)))
	if err != nil {
		return "", err
	}
	return filepath.Join(cacheDir, "localcluster", key), nil
}

// buildKey names the cache entry: the version's embedded module files and
// ldflags, the Go version and the platform decide what gets built. Pins of
// different versions differ, so each version has its own entry.
func buildKey(v Version, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	for _, u := range buildUnits(v) {
		for _, ext := range []string{".go.mod", ".go.sum"} {
			data, err := pins(v, u.module+ext)
			if err != nil {
				return "", err
			}
			h.Write(data)
		}
		fmt.Fprintln(h, u.ldflags)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (u buildUnit) build(ctx context.Context, v Version, root, bin string, progress io.Writer) error {
	src := filepath.Join(root, "src", u.module)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := pins(v, u.module+"."+name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(root, "tmp-"+u.module)
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out := tmp + string(filepath.Separator)
	if len(u.packages) == 1 {
		out = filepath.Join(tmp, u.outputs[0])
	}
	started := time.Now()
	fmt.Fprintf(progress, "localcluster: building %s\n", u.what)
	err := GoBuild{
		Label:    "localcluster: building " + u.what,
		Dir:      src,
		Env:      []string{"GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly")},
		Ldflags:  u.ldflags,
		Out:      out,
		Packages: u.packages,
		Total:    countPackages(ctx, src, u.packages),
	}.Run(ctx, progress)
	if err != nil {
		return fmt.Errorf("building %s: %w", u.what, err)
	}
	for _, out := range u.outputs {
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(tmp, out), filepath.Join(bin, out)); err != nil {
			return fmt.Errorf("installing %s: %w", out, err)
		}
	}
	fmt.Fprintf(progress, "localcluster: built %s in %s\n", u.what, time.Since(started).Round(time.Second))
	return nil
}

// countPackages is the number of packages the build may have to compile; it
// only feeds the progress line, so failure yields 0.
func countPackages(ctx context.Context, dir string, pkgs []string) int64 {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-f", "x"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return int64(bytes.Count(out, []byte("\n")))
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}
