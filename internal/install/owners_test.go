//go:build integration

package install_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// TestUninstallReleasesOwners: an owner teardown's controller held (its
// finalizer teardown.dev/dependents and the label teardown.dev/owner)
// loses both when teardown is uninstalled, so it can still be deleted;
// --dry-run changes nothing.
func TestUninstallReleasesOwners(t *testing.T) {
	ctx := t.Context()
	cfg := cluster.RESTConfig()
	if err := install.Apply(ctx, cfg, install.Options{}, t.Output()); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	held, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "held-", Labels: map[string]string{dependents.OwnerLabel: "true"},
		Finalizers: []string{dependents.Finalizer, "example.com/other"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := teardown(t, "uninstall", "--dry-run")
	if code != cmdutil.ExitOK || !strings.Contains(out+errOut, "would release configmaps default/"+held.Name) {
		t.Fatalf("teardown uninstall --dry-run: exit %d, want 0 and the owner to be released", code)
	}
	if live, err := cms.Get(ctx, held.Name, metav1.GetOptions{}); err != nil || !slices.Contains(live.Finalizers, dependents.Finalizer) {
		t.Fatalf("after --dry-run: %v, finalizers %v; want it still held", err, live.Finalizers)
	}
	code, out, errOut = teardown(t, "uninstall")
	if code != cmdutil.ExitOK || !strings.Contains(out+errOut, "released configmaps default/"+held.Name+" (finalizer teardown.dev/dependents)") {
		t.Fatalf("teardown uninstall: exit %d, want 0 and the owner released", code)
	}
	live, err := cms.Get(ctx, held.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live.Finalizers, []string{"example.com/other"}) || live.Labels[dependents.OwnerLabel] != "" {
		t.Errorf("after teardown uninstall: finalizers %v labels %v; want only example.com/other and no owner label", live.Finalizers, live.Labels)
	}
	live.Finalizers = nil
	if _, err := cms.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, held.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
