package suggest

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Options are the flags of `teardown suggest`.
type Options struct {
	Output  string
	Release string
}

// NewCommand returns `teardown suggest`.
func NewCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "suggest (deployment/NAME | --release NAME)",
		Short: "Propose a Teardown and owner rules for an installed operator, from what the cluster shows",
		Long: `suggest reads an installed operator (its Deployment, or the Helm release that
installed it) and proposes a Teardown for a person to review and apply. It
keeps the operator's ServiceAccount and the roles and bindings that give it
its rights until the plan is done; it deletes, in order, the custom
resources of the operator's CRDs that carry finalizers (the operator's own
configuration, which owns its workloads, last), then those the operator
alone wrote (its field manager is its command's base name) that nothing
owns, cluster-scoped or in its namespace, the webhook configurations
and APIServices calling Services of its namespace, the ClusterRoles and
bindings of ServiceAccounts of its namespace that nothing deletes, and the
release's cluster-scoped objects (deleting the namespace never deletes
them). It proposes an OwnerRule where the operator wrote objects of its
CRDs, owned by nothing, in other namespaces than its own or cluster-scoped,
each named by exactly one of its other (namespaced) custom resources by
the same fields (metadata.name or a spec field for the name, a spec field
for the namespace): teardown then deletes each when its owner goes; the
plan's last step deletes the rule. Where the evidence is partial or
fits several rules, it proposes none and says what it saw. Each entry
carries a comment saying why; what the cluster does not show is said at
the top. With it comes the ClusterRole teardown's controller needs to run
the plan and the rules. Nothing is changed.

-o yaml (the grants, the owner rules, the Teardown) is for kubectl apply -f -;
-o values puts the owner rules and the Teardown in the chart's value for
extra objects (extraDeploy, extraObjects, extraManifests or extraResources:
the one the chart's default values in the release's record have) for helm
upgrade --reuse-values -f, the grants as comments: apply them apart from the
release, before it (kubectl apply -l teardown.dev/aggregate-to-controller=true
keeps them alone of -o yaml).`,
		Example: `  teardown suggest deployment/sriov-network-operator -n sriov-network-operator
  teardown suggest --release sriov-network-operator -n sriov-network-operator -o yaml | kubectl apply -l teardown.dev/aggregate-to-controller=true -f -
  teardown suggest --release sriov-network-operator -n sriov-network-operator -o values > teardown-values.yaml
  teardown suggest deployment/tigera-operator -n tigera-operator -o yaml | kubectl apply -f -`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Run(cmd.Context(), flags, args, out, cmd.CommandPath())
		},
	}
	cmdutil.OutputFlag(cmd, &o.Output, Formats...)
	cmd.Flags().StringVar(&o.Release, "release", "", "the Helm release that installed the operator (its one Deployment is the operator's)")
	return cmd
}

// Run gathers, suggests and renders.
func (o *Options) Run(ctx context.Context, flags *genericclioptions.ConfigFlags, args []string, out io.Writer, path string) error {
	if len(args) == 0 && o.Release == "" {
		return cmdutil.Usagef("name the operator: deployment/NAME or --release NAME")
	}
	if len(args) > 0 {
		if err := resource.CheckArgs(args); err != nil {
			return err
		}
	}
	clients, ns, err := resource.Connect(ctx, flags)
	if err != nil {
		return err
	}
	target := Target{Namespace: ns, Release: o.Release}
	command := path
	if len(args) > 0 {
		info, err := resource.Resolve(clients, ns, args...)
		if err != nil {
			return err
		}
		if gk := info.Mapping.GroupVersionKind.GroupKind(); gk.Group != "apps" || gk.Kind != "Deployment" {
			return cmdutil.Usagef("%s: the operator is named by its Deployment (deployment/NAME)", strings.Join(args, " "))
		}
		target.Deployment = info.Name
		command += " deployment/" + info.Name
	}
	if o.Release != "" {
		command += " --release " + o.Release
	}
	command += " -n " + ns
	facts, err := Gather(ctx, clients, target)
	if err != nil {
		return err
	}
	if err := Render(out, Suggest(facts), o.Output, command); err != nil {
		return fmt.Errorf("writing the suggestion: %w", err)
	}
	return nil
}
