//go:build integration

package controller_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// admin is the admin configuration of the package's control plane, where
// testenv.Main installed teardown for controllers running as the admin
// user.
var admin *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, func(cfg *rest.Config) error { admin = cfg; return nil }, func() {})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// replica is one `teardown controller` process.
type replica struct {
	cmd    *exec.Cmd
	probes string
}

func startReplica(t *testing.T) *replica {
	t.Helper()
	r := &replica{probes: freeAddr(t)}
	r.cmd = exec.Command(testenv.TeardownBinary(t), "controller", "--kubeconfig", testenv.Kubeconfig,
		"--leader-elect=true", "--leader-election-namespace", install.Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address="+r.probes)
	r.cmd.Stdout, r.cmd.Stderr = io.Discard, io.Discard
	if os.Getenv("TEARDOWN_TEST_LOG") != "" {
		r.cmd.Stderr = os.Stderr
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
	waitUntil(t, 60*time.Second, "the replica's /healthz", func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + r.probes + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return r
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func leaseHolder(ctx context.Context, cs kubernetes.Interface) string {
	var l *coordinationv1.Lease
	l, err := cs.CoordinationV1().Leases(install.Namespace).Get(ctx, manager.LeaderElectionID, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLeaderElectionTakeover runs two controller processes, kills the
// leader with SIGKILL, and checks that the other takes over and finishes
// the work left pending: a lien release and a dependent deletion.
func TestLeaderElectionTakeover(t *testing.T) {
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

	first := startReplica(t)
	var leader string
	waitUntil(t, 60*time.Second, "the first replica to lead", func(ctx context.Context) (bool, error) {
		leader = leaseHolder(ctx, cs)
		return leader != "", nil
	})
	second := startReplica(t)

	// Work for the leader: a lien held by a ConfigMap, and a cluster-scoped
	// dependent of another ConfigMap.
	ns := "takeover"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	for _, o := range []client.Object{holder, owner, kept} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lien.Protect(ctx, k, kept, holder, "needed while holder exists"); err != nil {
		t.Fatal(err)
	}
	owner.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	dependent := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "takeover-dependent"}}
	if err := dependents.SetOwner(dependent, owner); err != nil {
		t.Fatal(err)
	}
	if err := k.Create(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the leader to protect the Secret", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(kept), kept)
		return err == nil && kept.Labels[lien.Label] == lien.LabelDeny, nil
	})

	// Kill the leader: it cannot release the Lease.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	// Leave work pending while nobody leads.
	for _, o := range []client.Object{holder, owner} {
		if err := k.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	waitUntil(t, 90*time.Second, "the second replica to take the Lease", func(ctx context.Context) (bool, error) {
		h := leaseHolder(ctx, cs)
		return h != "" && h != leader, nil
	})
	waitUntil(t, 60*time.Second, "the new leader to release the lien", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(kept), kept)
		return err == nil && kept.Labels[lien.Label] == "", nil
	})
	waitUntil(t, 60*time.Second, "the new leader to delete the dependent", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(dependent), dependent)
		return apierrors.IsNotFound(err), nil
	})
	if second.cmd.ProcessState != nil {
		t.Errorf("the second replica exited: %v", second.cmd.ProcessState)
	}
}

// TestProbesServe checks the probes the Deployment uses.
func TestProbesServe(t *testing.T) {
	r := startReplica(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		waitUntil(t, 60*time.Second, path, func(ctx context.Context) (bool, error) {
			resp, err := http.Get("http://" + r.probes + path)
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
	}
}

// TestUntrustedControllerRefusesToStart: a controller whose identity the
// lien policies do not trust, and that may not impersonate the
// controller's service account, would protect and release nothing; it
// refuses to start and prints the commands that fix it.
func TestUntrustedControllerRefusesToStart(t *testing.T) {
	ctx := t.Context()
	cfg := rest.CopyConfig(admin)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// alice may read whom the policies trust, and nothing else.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-trust"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"trusts"}, ResourceNames: []string{v1alpha1.TrustName}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-trust"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(testenv.TeardownBinary(t), "controller", "--kubeconfig", testenv.Kubeconfig, "--as", "alice",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("teardown controller as alice: %v, want exit code 1\n%s", err, out)
	}
	for _, want := range []string{
		"the lien policies do not trust alice",
		"`teardown install --controller-user alice`",
		"`teardown controller --as system:serviceaccount:teardown-system:teardown-controller`",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
