//go:build integration

package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
)

var (
	cfg    *rest.Config
	scheme = testenv.Scheme()
	// admin is the cluster admin (system:masters).
	admin client.Client
	// stopManager stops teardown's controllers, running in this process.
	stopManager func()
)

// TestMain starts the package's one control plane, installs teardown as
// `teardown install` does, and runs all of teardown's controllers in this
// process.
func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error {
		cfg = c
		var err error
		if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		return startControllers()
	}, func() {
		if stopManager != nil {
			stopManager()
		}
	})
}

// startControllers runs every teardown controller in this process.
func startControllers() error {
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		return err
	}
	stopManager, err = testenv.StartManager(mgr)
	return err
}

// withControllersDown stops teardown's controllers for the length of f, to
// show that what f tries is refused inside kube-apiserver alone.
func withControllersDown(t *testing.T, f func()) {
	t.Helper()
	stopManager()
	stopManager = nil
	defer func() {
		if err := startControllers(); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := admin.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// identity is an unprivileged ServiceAccount of a test.
type identity struct {
	// Client acts as the ServiceAccount (impersonated, with its groups).
	client.Client
	// Config is its REST configuration, for raw requests.
	Config *rest.Config
	// User is its user name, system:serviceaccount:NS:NAME.
	User string
}

// serviceAccount creates the ServiceAccount ns/name, grants it rules by a
// Role in ns and the given ClusterRoles by RoleBindings in ns (for
// example "edit"), and returns a client that acts as it.
func serviceAccount(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, clusterRoles ...string) identity {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := admin.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	if len(rules) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subject,
		}
		for _, o := range []client.Object{role, binding} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, cr := range clusterRoles {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + cr},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr},
			Subjects:   subject,
		}
		if err := admin.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, name)
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{
		UserName: user,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	c, err := client.New(as, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return identity{Client: c, Config: as, User: user}
}

// refused fails the test unless err is a refusal whose message holds
// every one of want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want refused", what)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refusal %q lacks %q", what, err, w)
		}
	}
}

// eventually polls cond every 100ms for up to timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}
