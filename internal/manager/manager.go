// Package manager assembles teardown's controller manager: one
// controller-runtime manager running the lien, dependents and teardown
// controllers, with leader election, health probes and metrics.
package manager

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	teardownv1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/dependents"
	"github.com/teardown-dev/teardown/internal/controller/lien"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/controller/teardown"
	"github.com/teardown-dev/teardown/internal/heartbeat"
)

// Controller is one of teardown's controllers, registered with the manager
// by its Setup.
type Controller struct {
	Name  string
	Setup func(mgr ctrl.Manager, meta *metacache.Cache, o Options) error
}

// Controllers are every controller teardown runs, in start order. Each
// controller package adds itself here. They share one metadata cache
// (package metacache) for the objects they watch that are not teardown's
// own kinds.
var Controllers = []Controller{
	{Name: "lien", Setup: func(mgr ctrl.Manager, meta *metacache.Cache, o Options) error {
		_, err := lien.Setup(mgr, lien.Options{Cache: meta, MaxConcurrentReconciles: o.LienWorkers})
		return err
	}},
	{Name: "dependents", Setup: func(mgr ctrl.Manager, meta *metacache.Cache, _ Options) error {
		_, err := dependents.Setup(mgr, dependents.Options{Cache: meta})
		return err
	}},
	{Name: "teardown", Setup: func(mgr ctrl.Manager, meta *metacache.Cache, _ Options) error {
		_, err := teardown.Setup(mgr, teardown.Options{Cache: meta})
		return err
	}},
}

// Names are the names of Controllers, for flags and messages.
func Names() []string {
	var names []string
	for _, c := range Controllers {
		names = append(names, c.Name)
	}
	return names
}

// Options configure New.
type Options struct {
	// Disabled names controllers not to run.
	Disabled []string
	// MetricsAddr serves Prometheus metrics; "0" turns them off.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" turns them off.
	ProbeAddr string
	// PprofAddr serves Go's /debug/pprof profiles; "0" or "" turns them
	// off.
	PprofAddr string
	// LeaderElection makes replicas elect one active manager by a Lease in
	// LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	// HeartbeatNamespace is where the controller renews its heartbeat
	// Lease (package heartbeat), with leader election on or off; "" writes
	// none (in-process managers of tests).
	HeartbeatNamespace string
	// LienWorkers is how many requests each lien controller works on at
	// once, one per namespace at a time; 0 means lien.DefaultWorkers.
	LienWorkers int
}

// LeaderElectionID names the Lease that replicas compete for.
const LeaderElectionID = "teardown-controller.teardown.dev"

// Scheme knows the built-in kinds and teardown's own.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := teardownv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New returns a manager with every enabled controller set up.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	for _, name := range o.Disabled {
		if !slices.Contains(Names(), name) {
			return nil, fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(Names(), ", "))
		}
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// New may run more than once in a process (each demo.Env's
		// StartTeardown, tests): controller names repeat across managers.
		Controller: config.Controller{SkipNameValidation: new(true)},
		// No controller reads managedFields, and they are a large part of
		// every cached copy (kube-controller-manager drops them too);
		// writes from the cache are patches, which leave them be.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if o.ProbeAddr != "0" && o.ProbeAddr != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
			if !mgr.GetCache().WaitForCacheSync(req.Context()) {
				return fmt.Errorf("caches not synced")
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if o.HeartbeatNamespace != "" {
		kube, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(heartbeat.New(kube, o.HeartbeatNamespace)); err != nil {
			return nil, err
		}
	}
	meta, err := metacache.ForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(meta); err != nil {
		return nil, err
	}
	for _, c := range Controllers {
		if slices.Contains(o.Disabled, c.Name) {
			continue
		}
		if err := c.Setup(mgr, meta, o); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", c.Name, err)
		}
	}
	return mgr, nil
}
