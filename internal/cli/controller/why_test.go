//go:build integration

package controller_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/heartbeat"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// startController starts `teardown controller` with args, as the docs run
// it; stop ends it with SIGTERM, as Kubernetes stops a Pod.
func startController(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(testenv.TeardownBinary(t), append([]string{"controller", "--kubeconfig", testenv.Kubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if os.Getenv("TEARDOWN_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// why runs `teardown why` as a process and returns its exit code and output.
func why(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(testenv.TeardownBinary(t), append([]string{"why", "--kubeconfig", testenv.Kubeconfig}, args...)...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("teardown why %v: %v\n%s", args, err, out)
	return 0, ""
}

// TestWhySeesTheRunningController: teardown why on a plan's trigger says
// the teardown controller runs, whether it was started with
// --leader-elect=false (as the docs run it from a workstation: no leader
// Lease, no Deployment) or with leader election, by its heartbeat Lease;
// once it stopped cleanly, that it is not running.
func TestWhySeesTheRunningController(t *testing.T) {
	ctx := t.Context()
	cfg := rest.CopyConfig(admin)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	const ns, plan = "why-controller", "why-controller-plan"
	fin := v1alpha1.TriggerFinalizerPrefix + plan
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trigger"}}
	if err := k.Create(ctx, trigger); err != nil {
		t.Fatal(err)
	}
	td := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: plan},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "trigger"},
			Steps:   []v1alpha1.TeardownStep{{Name: "delete-data", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "data"}}}},
		},
	}
	if err := k.Create(ctx, td); err != nil {
		t.Fatal(err)
	}

	runs := func(t *testing.T, what string) {
		t.Helper()
		code, out := why(t, "configmap/trigger", "-n", ns)
		for _, want := range []string{
			"finalizer " + fin + ": a deletion would wait for the teardown controller",
			", which runs",
			"running:    running: heartbeat Lease " + install.Namespace + "/" + heartbeat.LeaseName + " renewed by ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: teardown why lacks %q:\n%s", what, want, out)
			}
		}
		if code != 0 || strings.Contains(out, "not running") || strings.Contains(out, "not found") {
			t.Errorf("%s: teardown why exit %d, says the controller does not run:\n%s", what, code, out)
		}
		// kubectl get teardown NAME -o yaml, as advised, works.
		doctortest.RunAdvice(t, testenv.Kubeconfig, out, nil)
	}

	// Replicas other tests killed leave a leader Lease renewed up to 15s
	// ago and a heartbeat up to 40s ago: wait until neither says a
	// controller runs, so that what why says comes from this test's.
	leases := cs.CoordinationV1().Leases(install.Namespace)
	waitUntil(t, 60*time.Second, "earlier tests' leases to expire", func(ctx context.Context) (bool, error) {
		for _, name := range []string{manager.LeaderElectionID, heartbeat.LeaseName} {
			if l, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil && heartbeat.Fresh(l, time.Now()) {
				return false, nil
			}
		}
		return true, nil
	})

	stop := startController(t, "--leader-elect=false")
	waitUntil(t, 60*time.Second, "the plan to arm (its finalizer on the trigger)", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(trigger), trigger)
		return err == nil && slices.Contains(trigger.Finalizers, fin), nil
	})
	waitUntil(t, 30*time.Second, "the heartbeat Lease", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(install.Namespace).Get(ctx, heartbeat.LeaseName, metav1.GetOptions{})
		return err == nil && heartbeat.Fresh(l, time.Now()), nil
	})
	runs(t, "--leader-elect=false")

	stop()
	code, out := why(t, "configmap/trigger", "-n", ns)
	for _, want := range []string{
		"the teardown controller (or the operator, for a plan it runs with runner.SelfUninstall), which removes it, is not running",
		"heartbeat Lease " + install.Namespace + "/" + heartbeat.LeaseName + " released: the controller stopped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stopped: teardown why lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("stopped: teardown why exit %d, want 1 (the finalizer is stuck)", code)
	}
	doctortest.RunAdvice(t, testenv.Kubeconfig, out, nil)

	stop = startController(t, "--leader-elect=true", "--leader-election-namespace", install.Namespace)
	waitUntil(t, 90*time.Second, "the controller to lead and beat", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(install.Namespace).Get(ctx, heartbeat.LeaseName, metav1.GetOptions{})
		return err == nil && heartbeat.Fresh(l, time.Now()), nil
	})
	runs(t, "--leader-elect=true")

	// Disarm while the controller runs: it takes its finalizer off the trigger.
	if err := k.Delete(ctx, td); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the plan's finalizer to leave the trigger", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(trigger), trigger)
		return err == nil && !slices.Contains(trigger.Finalizers, fin), nil
	})
	stop()
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}
