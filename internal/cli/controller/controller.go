// Package controller is `teardown controller`: the controller manager, run
// in the cluster or, with a kubeconfig, from a workstation.
package controller

import (
	"flag"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/controller/lien"
	"github.com/teardown-dev/teardown/internal/manager"
)

// NewCommand returns `teardown controller`.
func NewCommand(flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := manager.Options{}
	zapOpts := zap.Options{}
	var qps float32
	var burst int
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run teardown's controllers (liens, cross-scope dependents, teardown plans)",
		Long: `Runs teardown's controllers: in the cluster as the teardown-controller service
account, or from a workstation with a kubeconfig.

Only the identities the lien policies trust (the Trust named teardown, set by
teardown install) may change lien markers. At start the controller asks kube-apiserver who it is: if the
policies trust that identity it acts as itself; if not, and it may impersonate
the teardown-controller service account (a cluster admin may), it acts as
that service account; otherwise it refuses to start and prints the command
that fixes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := cmdutil.Connect(cmd.Context(), flags)
			if err != nil {
				return err
			}
			if cfg, err = trustedConfig(cmd.Context(), cfg, cmd.ErrOrStderr()); err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = qps, burst
			o.HeartbeatNamespace = o.LeaderElectionNamespace
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "teardown-system"
	}
	cmd.Flags().StringSliceVar(&o.Disabled, "disable-controllers", nil, "controllers not to run")
	cmd.Flags().Float32Var(&qps, "kube-api-qps", 50, "queries per second to kube-apiserver, as kube-controller-manager's flag of the same name")
	cmd.Flags().IntVar(&burst, "kube-api-burst", 100, "burst of queries to kube-apiserver")
	cmd.Flags().IntVar(&o.LienWorkers, "lien-workers", lien.DefaultWorkers, "requests each lien controller (Lien, ClusterLien, helmReleasesOf, markers) works on at once; one namespace's requests are worked on one at a time")
	cmd.Flags().StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus metrics endpoint ("0" turns it off)`)
	cmd.Flags().StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" turns them off)`)
	cmd.Flags().StringVar(&o.PprofAddr, "pprof-bind-address", "0", `address of Go's /debug/pprof profiles, to see where memory and CPU go ("0" turns them off)`)
	cmd.Flags().BoolVar(&o.LeaderElection, "leader-elect", true, "elect one active replica by a Lease")
	cmd.Flags().StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", ns, "namespace of the leader-election Lease and of the heartbeat Lease teardown why reads, with or without leader election (default: $POD_NAMESPACE, else teardown-system)")
	fs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(fs)
	cmd.Flags().AddGoFlagSet(fs)
	return cmd
}
