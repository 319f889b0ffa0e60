// Package uninstall is `teardown uninstall`: it deletes what `teardown
// install` applied, the lien policies first, so that no object stays
// undeletable.
package uninstall

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/install"
)

// NewCommand returns `teardown uninstall`.
func NewCommand(flags *genericclioptions.ConfigFlags, out, errOut io.Writer) *cobra.Command {
	var opts install.UninstallOptions
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete what teardown install applied, the lien admission policies first (idempotent)",
		Long: `Deletes the lien ValidatingAdmissionPolicies and their bindings first, and
waits until they are gone and kube-apiserver lets a lien-labelled object be
deleted (it creates and deletes the ConfigMap teardown-uninstall-probe, in
--namespace, default teardown-system, to see that). Then it deletes the
controller's Deployment, PodDisruptionBudget and metrics Service, its RBAC,
the policy parameters and the namespace teardown-system, in reverse install
order, waiting until each is gone. Objects already gone are fine: running it
again changes nothing.

The CRDs, and so every Lien, ClusterLien and Teardown, are kept unless
--crds; --crds is refused, before anything is deleted, while one of those
exists (its finalizer needs the controller). --policies-only deletes the
policies and bindings only: what the Helm chart's pre-delete hook runs.
--dry-run sends every DELETE as a server-side dry run and changes nothing.

Lien labels, annotations and (under a Defer lien) the finalizer
teardown.dev/lien stay on the objects that carried them: see
docs/operating.md, "Uninstalling teardown".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.PoliciesOnly && opts.CRDs {
				return cmdutil.Usagef("--policies-only and --crds exclude each other")
			}
			cfg, err := cmdutil.Connect(cmd.Context(), flags)
			if err != nil {
				return err
			}
			if flags.Namespace != nil {
				opts.Namespace = *flags.Namespace
			}
			progress := errOut
			if opts.DryRun {
				progress = out
			}
			return install.Uninstall(cmd.Context(), cfg, opts, progress)
		},
	}
	cmd.Flags().BoolVar(&opts.PoliciesOnly, "policies-only", false, "delete only the lien policies and their bindings (the Helm chart's pre-delete hook)")
	cmd.Flags().BoolVar(&opts.CRDs, "crds", false, "also delete the CRDs (refused while a Lien, ClusterLien or Teardown exists)")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "send every DELETE as a server-side dry run and change nothing")
	return cmd
}
