//go:build integration

package install_test

import (
	"context"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestPolicyProbesBesideARunningController: install's and uninstall's
// policy probes carry the entry of a lien that never exists, which a
// running lien controller (a reinstall, an uninstall) would take off as
// stray. Beside one: a reinstall returns with a lien-labelled object's
// DELETE refused and leaves no probe behind; and, while teardown-lien-deny
// is still enforced (only the tamper policy gone, so that the uninstall
// probe can be created), uninstall's wait never reports it unenforced: it
// runs out of time instead. Uninstall itself then returns with such a
// DELETE allowed.
func TestPolicyProbesBesideARunningController(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	ctx := t.Context()
	cfg := cluster.RESTConfig()
	if err := install.Apply(ctx, cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	// A lien on a ConfigMap, so that the controller watches ConfigMaps.
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	kept, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probed-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: kept.Name},
		Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: kept.Name}}, Reason: "probe test"},
	}
	if err := mgr.GetClient().Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the controller to mark the protected ConfigMap", func(ctx context.Context) (bool, error) {
		cur, err := cms.Get(ctx, kept.Name, metav1.GetOptions{})
		return err == nil && cur.Labels[lien.Label] == lien.LabelDeny, err
	})
	dryRunDelete := func() error {
		return cms.Delete(ctx, kept.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}

	// A reinstall beside the running controller.
	if err := install.Apply(ctx, cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		t.Fatalf("reinstalling beside a running controller: %v", err)
	}
	if err := dryRunDelete(); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a lien-labelled ConfigMap right after the reinstall: %v, want Forbidden", err)
	}
	left, err := cs.CoreV1().ConfigMaps(install.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range left.Items {
		if cm.Labels[lien.Label] != "" {
			t.Errorf("the reinstall left a lien-labelled ConfigMap %s/%s", cm.Namespace, cm.Name)
		}
	}

	// The tamper policy gone, the deny policy still enforced: uninstall's
	// wait must not say that a labelled object is deletable.
	vaps := cs.AdmissionregistrationV1()
	if err := vaps.ValidatingAdmissionPolicyBindings().Delete(ctx, "teardown-lien-tamper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vaps.ValidatingAdmissionPolicies().Delete(ctx, "teardown-lien-tamper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := install.WaitNotEnforced(short, cfg, install.Namespace); err == nil {
		t.Errorf("uninstall's wait said the lien policy is no longer enforced while teardown-lien-deny is; a labelled DELETE now: %v", dryRunDelete())
	}
	if err := dryRunDelete(); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a lien-labelled ConfigMap while teardown-lien-deny is enforced: %v, want Forbidden", err)
	}

	if err := install.Uninstall(ctx, cfg, install.UninstallOptions{PoliciesOnly: true}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := dryRunDelete(); err != nil {
		t.Errorf("deleting a lien-labelled ConfigMap right after uninstall: %v, want allowed", err)
	}
	// Uninstall's probes are gone, labelled or not.
	if _, err := cs.CoreV1().ConfigMaps(install.Namespace).Get(ctx, install.UninstallProbe, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("uninstall left its probe %s/%s: %v", install.Namespace, install.UninstallProbe, err)
	}
	// The Lien goes while its controller runs (its finalizer needs it): a
	// later test's uninstall --crds is refused while a Lien exists.
	if err := mgr.GetClient().Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the Lien to be gone", func(ctx context.Context) (bool, error) {
		return testenv.Gone(ctx, mgr.GetAPIReader(), l)
	})
	if err := cms.Delete(ctx, kept.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
