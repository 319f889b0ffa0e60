// Command helm-operator is a minimal Helm operator built on the upstream
// reconciler of github.com/operator-framework/helm-operator-plugins: each
// Foo (example.com/v1) in any namespace is a Helm release of the embedded
// chart, installed, upgraded on a spec change and uninstalled when the Foo
// is deleted, exactly as the upstream code does it. The chart renders a
// ConfigMap in the Foo's namespace and a cluster-scoped ClusterRole, so a
// namespace deletion that outruns the uninstall leaves the ClusterRole
// behind.
package main

import (
	"embed"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// chartFiles is the chart every Foo installs.
//
//go:embed chart
var chartFiles embed.FS

var fooGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Foo"}

func main() {
	var metricsAddr, probeAddr string
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address the metrics endpoint binds to; 0 turns it off")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "address the health probes bind to; 0 turns them off")
	logOpts := zap.Options{Development: true}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse() // --kubeconfig is controller-runtime's own flag
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	log := ctrl.Log.WithName("setup")

	if err := run(metricsAddr, probeAddr); err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run(metricsAddr, probeAddr string) error {
	chrt, err := loadChart()
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("getting the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if probeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return fmt.Errorf("adding the health check: %w", err)
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return fmt.Errorf("adding the ready check: %w", err)
		}
	}
	r, err := reconciler.New(
		reconciler.WithChart(*chrt),
		reconciler.WithGroupVersionKind(fooGVK),
	)
	if err != nil {
		return fmt.Errorf("creating the helm reconciler: %w", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the helm reconciler: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// loadChart loads the embedded chart directory.
func loadChart() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartFiles, "chart", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(path, "chart/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	chrt, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart: %w", err)
	}
	return chrt, nil
}
