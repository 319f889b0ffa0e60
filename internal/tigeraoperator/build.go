package tigeraoperator

import (
	"context"
	"io"
	"path/filepath"

	"github.com/teardown-dev/teardown/internal/gobuild"
)

const (
	// Module is the operator's Go module.
	Module = "github.com/tigera/operator"
	// Version is the release built and tested: Calico v3.26's operator.
	Version = "v1.30.0"
	// Operator is the operator's binary (the module's main package), named
	// as its image names its command.
	Operator = "operator"
)

// CRDDirs are the module's directories of the CRDs a Calico install needs
// (pkg/crds: the operator's own, operator.tigera.io, and Calico's,
// crd.projectcalico.org), which its release manifests and chart carry.
var CRDDirs = []string{"pkg/crds/operator", "pkg/crds/calico"}

// Release is the operator's module and its binary, built.
type Release struct {
	// Source is the module's directory (read-only, in the module cache).
	Source string
	// Bin holds Operator.
	Bin string
}

// Path is the path of the operator's binary.
func (r Release) Path() string { return filepath.Join(r.Bin, Operator) }

// CRDs are the directories of CRDDirs in the module.
func (r Release) CRDs() []string {
	dirs := make([]string, len(CRDDirs))
	for i, d := range CRDDirs {
		dirs[i] = filepath.Join(r.Source, d)
	}
	return dirs
}

// Build returns Version's module and the operator built from it with its
// own go.mod into cacheDir, once (package gobuild); progress gets a first
// build's progress lines.
func Build(ctx context.Context, cacheDir string, progress io.Writer) (Release, error) {
	b, err := gobuild.Build(ctx, cacheDir, spec, progress)
	if err != nil {
		return Release{}, err
	}
	return Release{Source: b.Source, Bin: b.Bin}, nil
}

// spec builds the module's main package as its Makefile does (version.VERSION
// set; no -s -w: symbols help a failure's report).
var spec = gobuild.Spec{
	Name: "tigera-operator", Module: Module, Version: Version, Packages: []string{"."},
	Ldflags:  "-X " + Module + "/version.VERSION=" + Version,
	Estimate: "about 10 minutes on two cores",
}
