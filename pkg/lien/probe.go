package lien

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The policy probes of `teardown install` and `teardown uninstall`
// (internal/install): a lien-labelled ConfigMap in ProbeNamespace whose
// dry-run DELETE tells whether kube-apiserver enforces the lien policy. Its
// entry names a lien that never exists, which the lien controller would
// otherwise take off as stray while the probe is polled (a reinstall or an
// uninstall beside a running controller). Only ProbeNamespace holds them:
// whoever may create a labelled object there (the controller, break-glass)
// is trusted already.
const (
	// ProbeNamespace is teardown-system, where the probes live.
	ProbeNamespace = "teardown-system"
	// InstallProbeLien is the entry of install's probes, each named
	// InstallProbePrefix and a random suffix.
	InstallProbeLien   = ProbeNamespace + "/install-probe"
	InstallProbePrefix = "teardown-policy-probe-"
	// UninstallProbeLien is the entry of uninstall's probe, UninstallProbe.
	UninstallProbeLien = ProbeNamespace + "/uninstall-probe"
	UninstallProbe     = "teardown-uninstall-probe"
)

// IsProbe reports whether the object of kind gvk, namespace/name, is one of
// install's policy probes carrying that probe's own entry, lienKey: a
// ConfigMap in ProbeNamespace, named as the probe that entry belongs to.
// Any other object carrying a probe's entry is no probe.
func IsProbe(gvk schema.GroupVersionKind, namespace, name, lienKey string) bool {
	if gvk != (schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) || namespace != ProbeNamespace {
		return false
	}
	switch lienKey {
	case InstallProbeLien:
		return strings.HasPrefix(name, InstallProbePrefix)
	case UninstallProbeLien:
		return name == UninstallProbe
	}
	return false
}
