package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/podtoken"
)

// StartTeardown installs teardown into the cluster and runs its controller
// manager in this process until ctx ends, as the Env's own user (trusted
// to change lien markers for it); the "with teardown" half of each
// scenario runs after it. Calling it again, from any Env of the same
// cluster, does nothing while the manager it started runs; once that
// manager's ctx ended, it waits for it to stop and starts a new one.
func (e *Env) StartTeardown(ctx context.Context) error {
	return e.startTeardown(ctx, false)
}

// StartTeardownAsServiceAccount is StartTeardown with the controller
// authenticating as teardown's in-cluster identity, the ServiceAccount
// install creates (install.ControllerUser), by a token of the TokenRequest
// API and nothing else: no client certificate, no impersonation. It holds
// what RBAC binds to that ServiceAccount: the install's ClusterRoles (the
// aggregated teardown-controller, its base, the leader-election Role) and
// whatever ClusterRoles labelled teardown.dev/aggregate-to-controller are
// applied, as a controller running in the cluster would. The install
// trusts only that ServiceAccount to change lien markers (its default),
// so a manager StartTeardown started is no longer trusted.
//
// It shares StartTeardown's one manager per cluster and process: while a
// manager StartTeardown started runs (its ctx not ended), it returns an
// error rather than run a second controller beside it, and the other
// way round.
func (e *Env) StartTeardownAsServiceAccount(ctx context.Context) error {
	return e.startTeardown(ctx, true)
}

// tokenTTL is how long the ServiceAccount's token is valid: longer than
// any test that runs a manager on it.
const tokenTTL = 2 * time.Hour

func (e *Env) startTeardown(ctx context.Context, asServiceAccount bool) error {
	// One controller manager per cluster and process: Envs made for the
	// same cluster (tests make several) share it.
	running.Lock()
	defer running.Unlock()
	if m, ok := running.hosts[e.Config.Host]; ok {
		if m.ctx.Err() == nil {
			if m.asServiceAccount != asServiceAccount {
				return fmt.Errorf("teardown's controller already runs for %s as %s: end its ctx before starting it as another identity", e.Config.Host, m.user)
			}
			return nil
		}
		<-m.done
		delete(running.hosts, e.Config.Host)
	}
	ctrl.SetLogger(logr.Discard()) // the demo prints its own story
	cfg, user, opts := e.Config, install.ControllerUser, install.Options{}
	if !asServiceAccount {
		// The controller runs here, as the demo's own user: trust that
		// user to change lien markers, as install does for the in-cluster
		// controller.
		who, err := install.WhoAmI(ctx, e.Config)
		if err != nil {
			return fmt.Errorf("finding the demo's user name: %w", err)
		}
		user = who.Username
		opts.ControllerUsers = []string{user}
	}
	if err := install.Apply(ctx, e.Config, opts, io.Discard); err != nil {
		return fmt.Errorf("installing teardown: %w", err)
	}
	if asServiceAccount {
		var err error
		if cfg, err = e.serviceAccountConfig(ctx); err != nil {
			return err
		}
		who, err := install.WhoAmI(ctx, cfg)
		if err != nil {
			return fmt.Errorf("asking who the token of %s is: %w", user, err)
		}
		if who.Username != user {
			return fmt.Errorf("the token of %s authenticates as %s", user, who.Username)
		}
	}
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0", HeartbeatNamespace: install.Namespace})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- mgr.Start(ctx)
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("starting teardown's controllers: %w", err)
		default:
			return errors.New("starting teardown's controllers: caches did not sync")
		}
	}
	running.hosts[e.Config.Host] = started{ctx: ctx, done: done, user: user, asServiceAccount: asServiceAccount}
	return nil
}

// serviceAccountConfig is the Env's server and CA with a token of
// teardown's ServiceAccount (TokenRequest, through the Env's own user) as
// the only credential.
func (e *Env) serviceAccountConfig(ctx context.Context) (*rest.Config, error) {
	tr, err := e.Kube.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, install.ControllerServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenTTL / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of serviceaccount %s/%s: %w", install.Namespace, install.ControllerServiceAccount, err)
	}
	return podtoken.Config(e.Config, tr.Status.Token), nil
}

// running records the clusters this process runs teardown for.
var running = struct {
	sync.Mutex
	hosts map[string]started
}{hosts: map[string]started{}}

// started is one controller manager StartTeardown started: it runs until
// ctx ends, and done closes once it has stopped; user is who it acts as.
type started struct {
	ctx              context.Context
	done             chan struct{}
	user             string
	asServiceAccount bool
}
