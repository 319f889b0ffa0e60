// Package install is `teardown install`: teardown's CRDs, RBAC and lien
// policies, server-side applied to the current cluster.
package install

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/install"
)

// NewCommand returns `teardown install`.
func NewCommand(flags *genericclioptions.ConfigFlags, out, errOut io.Writer) *cobra.Command {
	var opts install.Options
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install teardown's CRDs, RBAC and lien admission policies (idempotent)",
		Long: `Server-side applies teardown's CRDs (Lien, ClusterLien), the controller's
namespace, service account and aggregated RBAC, and the two lien
ValidatingAdmissionPolicies, then waits until kube-apiserver enforces them.
Running it again changes nothing. --dry-run prints the objects instead.

teardown's controller changes only the kinds it is granted: --grant and
--grant-delete write the ClusterRole ` + install.GrantsRole + ` with exactly those
rights (without them, install leaves it as it is). Install ends by saying
what the controller is granted now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				objs, err := install.Objects(opts)
				if err != nil {
					return err
				}
				return install.Render(out, objs)
			}
			cfg, err := cmdutil.Connect(cmd.Context(), flags)
			if err != nil {
				return err
			}
			return install.Apply(cmd.Context(), cfg, opts, errOut)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the objects that would be applied and change nothing")
	cmd.Flags().StringSliceVar(&opts.ControllerUsers, "controller-user", nil, "also trust this user as teardown's controller, to change lien markers and Teardowns' status (a controller run outside the cluster)")
	cmd.Flags().StringVar(&opts.ControllerImage, "controller-image", "", "also install the controller's Deployment (2 replicas), PodDisruptionBudget and metrics Service, running this image")
	cmd.Flags().StringSliceVar(&opts.Grants.Patch, "grant", nil, "let teardown's controller patch these resources (RESOURCE or GROUP/RESOURCE, e.g. secrets,configmaps,example.com/foos), so that liens, owner policies and plans can protect them: the ClusterRole "+install.GrantsRole+", labelled teardown.dev/aggregate-to-controller=true, holds exactly what --grant and --grant-delete name")
	cmd.Flags().StringSliceVar(&opts.Grants.Delete, "grant-delete", nil, "let teardown's controller delete these resources (as --grant), so that it collects linked dependents and runs plan steps that delete them")
	cmd.Flags().StringSliceVar(&opts.BreakGlassGroups, "break-glass-group", nil, "groups allowed to change lien markers by hand (default teardown.dev:break-glass)")
	return cmd
}
