package demo

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/localcluster"
)

// Options are the demo's flags.
type Options struct {
	// UseCluster runs the scenarios on the cluster of the kubeconfig flags
	// instead of a new local control plane.
	UseCluster bool
}

// NewCommand returns `teardown demo`.
func NewCommand(flags *genericclioptions.ConfigFlags, out, errOut io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Replay, on a real local control plane, the deletions Kubernetes gets wrong",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			restCfg, local, stop, err := o.cluster(cmd, flags, errOut)
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(out, "\nteardown demo: deletions that Kubernetes gets wrong, replayed on a real control plane (%s)\n", restCfg.Host)
			env, err := NewEnv(restCfg, out)
			if err != nil {
				return err
			}
			env.Progress = errOut
			if local != nil {
				env.Services = local
			}
			_, err = Run(ctx, env)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.UseCluster, "use-cluster", false, "run on the cluster of --kubeconfig/--context instead of a new local control plane (creates and deletes namespace foohome and CRD foos.example.com; the real sriov-network-operator scenario needs the local control plane and is skipped)")
	return cmd
}

// cluster returns the cluster to run on, the local control plane when it
// is one, and how to let go of it.
func (o *Options) cluster(cmd *cobra.Command, flags *genericclioptions.ConfigFlags, errOut io.Writer) (*rest.Config, *localcluster.Cluster, func(), error) {
	if o.UseCluster {
		cfg, err := cmdutil.Connect(cmd.Context(), flags)
		return cfg, nil, func() {}, err
	}
	c, err := localcluster.Start(cmd.Context(), localcluster.Options{Progress: errOut})
	if err != nil {
		return nil, nil, nil, err
	}
	return c.RESTConfig(), c, func() { _ = c.Stop() }, nil
}
