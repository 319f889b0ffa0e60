package tigeraoperator

import (
	"context"
	"fmt"
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

// CRDFiles are the module's CRDs a Calico (not Enterprise) install needs,
// as patterns of paths in the module: Calico's (crd.projectcalico.org) and
// the operator's own for Calico (operator.tigera.io). Calico's chart
// carries these; the operator's Enterprise CRDs (LogStorage, Monitor...)
// would make it run its Enterprise controllers.
var CRDFiles = []string{
	"pkg/crds/calico/*.yaml",
	"pkg/crds/operator/operator.tigera.io_apiservers.yaml",
	"pkg/crds/operator/operator.tigera.io_imagesets.yaml",
	"pkg/crds/operator/operator.tigera.io_installations.yaml",
	"pkg/crds/operator/operator.tigera.io_tigerastatuses.yaml",
}

// Release is the operator's module and its binary, built.
type Release struct {
	// Source is the module's directory (read-only, in the module cache).
	Source string
	// Bin holds Operator.
	Bin string
}

// Path is the path of the operator's binary.
func (r Release) Path() string { return filepath.Join(r.Bin, Operator) }

// CRDs are the files of CRDFiles in the module.
func (r Release) CRDs() ([]string, error) {
	var files []string
	for _, pattern := range CRDFiles {
		m, err := filepath.Glob(filepath.Join(r.Source, pattern))
		if err != nil || len(m) == 0 {
			return nil, fmt.Errorf("the module %s@%s has no %s", Module, Version, pattern)
		}
		files = append(files, m...)
	}
	return files, nil
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
