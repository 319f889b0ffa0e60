package lien

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestIsProbe(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	for _, tc := range []struct {
		gvk             schema.GroupVersionKind
		namespace, name string
		lien            string
		want            bool
	}{
		{cm, ProbeNamespace, InstallProbePrefix + "x7k2p", InstallProbeLien, true},
		{cm, ProbeNamespace, UninstallProbe, UninstallProbeLien, true},
		// Another probe's entry, another name, kind or namespace: no probe.
		{cm, ProbeNamespace, InstallProbePrefix + "x7k2p", UninstallProbeLien, false},
		{cm, ProbeNamespace, UninstallProbe, InstallProbeLien, false},
		{cm, ProbeNamespace, "settings", InstallProbeLien, false},
		{cm, "app", UninstallProbe, UninstallProbeLien, false},
		{cm, "app", InstallProbePrefix + "x7k2p", InstallProbeLien, false},
		{secret, ProbeNamespace, UninstallProbe, UninstallProbeLien, false},
		{cm, ProbeNamespace, UninstallProbe, ProbeNamespace + "/other", false},
	} {
		if got := IsProbe(tc.gvk, tc.namespace, tc.name, tc.lien); got != tc.want {
			t.Errorf("IsProbe(%s, %s/%s, %s) = %t, want %t", tc.gvk.Kind, tc.namespace, tc.name, tc.lien, got, tc.want)
		}
	}
}
