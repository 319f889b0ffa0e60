package peers

import (
	"path/filepath"
	"regexp"
	"strings"
)

// Peer is a tool people reach for on a stuck deletion, at an exact
// version of its Go module.
type Peer struct {
	// Name names its column.
	Name string
	// Module and Version are what the go command asks the module proxy
	// for: a release tag, or a commit where the project has none we could
	// confirm (the proxy resolves a commit to its pseudo-version).
	Module, Version string
	// Package is the main package to build, relative to the module root;
	// empty for a script.
	Package string
	// Script is the shell script to run with bash, relative to the module
	// root (a module without a go.mod: the proxy serves its files anyway).
	Script string
	// Args is its command line for a target, after the program.
	Args func(t Target, kubeconfig string) []string
	// Clean tells whether an answer on c claims that nothing holds where
	// the tool's own checks should have seen it (nil: the tool makes no
	// such claim we can read).
	Clean func(c Case, exit int, out string) bool
	// Source says where the version and the command line come from.
	Source string
}

// Teardown is the column of teardown itself: its answers are recorded by
// the corpus test, never built here.
const Teardown = "teardown"

// Peers are the tools compared, in the table's order.
var Peers = []Peer{
	{
		Name: "knsk", Module: "github.com/thyarles/knsk", Version: "be3fc3f759798d9ce26c63fb008bc9135c43a365",
		Script: "knsk.sh",
		// Its dry run: what it finds, and the commands it would run to
		// "clean" (its --delete-all) without running them.
		Args: func(_ Target, kubeconfig string) []string {
			return []string{"--no-color", "--kubeconfig", kubeconfig, "--dry-run", "--delete-all"}
		},
		// Each of its checks (unavailable APIServices, Terminating
		// namespaces and objects) ends "... found" or "... not found";
		// where nothing is being deleted, its all-clear is true.
		Clean:  func(c Case, _ int, out string) bool { return !c.Idle && !knskFound.MatchString(out) },
		Source: "knsk.sh at its newest commit in the public index; it has no release tags; flags from its --help",
	},
	{
		Name: "kor", Module: "github.com/yonahd/kor", Version: "4fa66514c8717edf012b474920bea7eedf0ad760",
		Package: ".",
		Args: func(t Target, kubeconfig string) []string {
			sub := "finalizer" // resources waiting for finalizers
			if t.Command == "orphans" {
				sub = "all" // unused resources
			}
			args := []string{sub, "--kubeconfig", kubeconfig}
			if sub == "all" {
				args = append(args, "--show-reason")
			}
			if t.Namespace != "" {
				args = append(args, "--include-namespaces", t.Namespace)
			}
			return args
		},
		Source: "the newest commit of cmd/kor in the public index (its release tags were refused as well); `kor finalizer` for a stuck deletion, `kor all --show-reason` for garbage; flags from cmd/kor/root.go; read-only without --delete",
	},
	{
		Name: "kubectl-check-ownerreferences", Module: "sigs.k8s.io/kubectl-check-ownerreferences", Version: "5b738fefe7a30c331994ef6e072ddaa16a826dc8",
		Package: ".",
		// Read-only, cluster-wide: it takes no target. Its all-clear ("No
		// invalid ownerReferences found") is about ownerReferences only, so
		// it is never read as saying that nothing holds.
		Args: func(_ Target, kubeconfig string) []string {
			return []string{"--kubeconfig", kubeconfig}
		},
		Source: "the newest go.mod commit in the public index; usage from its README",
	},
	{
		Name: "finalizer-doctor", Module: "github.com/alexremn/finalizer-doctor", Version: "v0.1.3",
		Package: "./cmd/finalizer-doctor",
		// Its default is a dry run that explains; --all scans the cluster.
		Args: func(t Target, kubeconfig string) []string {
			if t.Command == "orphans" || t.Object == "" {
				return []string{"--all", "--kubeconfig", kubeconfig}
			}
			// It resolves RESOURCE[.GROUP]/NAME by discovery within GROUP
			// (internal/discover/resolve.go): a kind outside the core group
			// needs its group.
			obj := strings.Replace(t.Object, "customresourcedefinition/", "customresourcedefinitions.apiextensions.k8s.io/", 1)
			args := []string{obj, "--kubeconfig", kubeconfig}
			if t.Namespace != "" && !strings.HasPrefix(t.Object, "namespace/") {
				args = append(args, "-n", t.Namespace)
			}
			return args
		},
		Source: "its newest release (v0.1.3); flags from internal/cli/root.go, targets from internal/discover/resolve.go",
	},
}

// knskFound is a check of knsk that found something.
var knskFound = regexp.MustCompile(`(?m)\.\.\.\s*found\s*$`)

// Command is the program and arguments that run peer p, built into bin
// (its script, or its binary), on target t.
func (p Peer) Command(bin string, t Target, kubeconfig string) (string, []string) {
	if p.Script != "" {
		return "bash", append([]string{filepath.Join(bin, filepath.Base(p.Script))}, p.Args(t, kubeconfig)...)
	}
	return filepath.Join(bin, p.Name), p.Args(t, kubeconfig)
}

// PeerNamed returns the peer called name.
func PeerNamed(name string) (Peer, bool) {
	for _, p := range Peers {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}
