//go:build integration

package lien

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestInstallProbesKeepTheirEntry: install's and uninstall's policy probes
// (lien.IsProbe) carry the entry of a lien that never exists, and the
// controller leaves it while install polls them. Only install's own
// ConfigMaps keep it: in teardown-system, a ConfigMap of another name, or
// named as the other probe, carrying a probe's entry loses it as any stray;
// and a probe's entry written without the label (which anyone who may
// write the annotation can do), on a ConfigMap named as a probe in
// teardown-system or in a tenant's namespace, is never repaired into a
// label.
func TestInstallProbesKeepTheirEntry(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "probes")
	// Liens naming ConfigMaps in both namespaces, so that the controller
	// watches them there.
	denyLien(t, lien.ProbeNamespace, "probes-watched")
	denyLien(t, ns, "watched")
	marked := func(namespace, name, entry string, labelled bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Annotations: map[string]string{lien.Annotation: `[{"lien":"` + entry + `","reason":"probe test"}]`},
		}}
		if labelled {
			cm.Labels = map[string]string{lien.Label: lien.LabelDeny}
		}
		if err := k.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			unmark := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+lien.Label+`":null},"annotations":{"`+lien.Annotation+`":null}}}`))
			ctx := context.Background()
			if err := k.Patch(ctx, cm, unmark); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
			if err := k.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		})
		return cm
	}
	// The probes first: a pass that cleans the decoys after them has seen them.
	installProbe := marked(lien.ProbeNamespace, lien.InstallProbePrefix+"test", lien.InstallProbeLien, true)
	uninstallProbe := marked(lien.ProbeNamespace, lien.UninstallProbe, lien.UninstallProbeLien, true)
	decoys := []*corev1.ConfigMap{
		marked(lien.ProbeNamespace, "probe-decoy", lien.InstallProbeLien, true),
		marked(lien.ProbeNamespace, lien.InstallProbePrefix+"swapped", lien.UninstallProbeLien, true),
	}
	forged := []*corev1.ConfigMap{
		marked(lien.ProbeNamespace, lien.InstallProbePrefix+"forged", lien.InstallProbeLien, false),
		marked(ns, lien.UninstallProbe, lien.UninstallProbeLien, false),
	}
	for _, cm := range append(decoys, forged...) {
		eventually(t, 30*time.Second, "the probe entry to come off "+cm.Namespace+"/"+cm.Name, func(ctx context.Context) (bool, error) {
			if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
				return false, err
			}
			_, annotated := cm.Annotations[lien.Annotation]
			return !annotated && cm.Labels[lien.Label] == "", nil
		})
	}
	for _, cm := range forged {
		if err := k.Delete(ctx, cm, client.DryRunAll); err != nil {
			t.Errorf("deleting %s/%s, whose forged probe entry was repaired: %v, want allowed", cm.Namespace, cm.Name, err)
		}
	}
	for _, cm := range []*corev1.ConfigMap{installProbe, uninstallProbe} {
		if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		if has, err := lien.Has(cm, lien.InstallProbeLien); cm.Name == installProbe.Name && (err != nil || !has) {
			t.Errorf("install's probe %s lost its entry: %v %v", cm.Name, cm.Annotations, err)
		}
		if has, err := lien.Has(cm, lien.UninstallProbeLien); cm.Name == uninstallProbe.Name && (err != nil || !has) {
			t.Errorf("uninstall's probe %s lost its entry: %v %v", cm.Name, cm.Annotations, err)
		}
		if cm.Labels[lien.Label] != lien.LabelDeny {
			t.Errorf("probe %s lost its label: %v", cm.Name, cm.Labels)
		}
	}
}
