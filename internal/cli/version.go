package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// Version is teardown's own version, set at link time by the Makefile.
var Version = "v0.0.0-dev"

func newVersionCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print teardown's version and the cluster's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(out, "teardown: %s\n", Version)
			if clientOnly {
				return nil
			}
			cfg, err := cmdutil.Connect(cmd.Context(), flags)
			if err != nil {
				return err
			}
			dc, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return err
			}
			info, err := dc.ServerVersion()
			if err != nil {
				return &cmdutil.UnreachableError{Server: cfg.Host, Err: err}
			}
			fmt.Fprintf(out, "server: %s (%s)\n", info.GitVersion, cfg.Host)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print teardown's version only")
	return cmd
}
