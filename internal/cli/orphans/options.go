package orphans

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Options are the flags of `teardown orphans`.
type Options struct {
	AllNamespaces bool
	Output        string
}

// NewCommand returns `teardown orphans`.
func NewCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "orphans",
		Short: "Find garbage nothing will collect: owners gone, Helm releases gone, finalizers nobody removes",
		Long: `orphans audits the cluster for objects nothing will ever clean up:
dependents whose owner is gone (ownerReferences and teardown owner links),
objects Helm installed outside their release namespace (cluster-scoped or
in another namespace) whose release namespace or release record is gone,
and objects held Terminating by a finalizer nothing runs to remove.

Cluster-scoped objects are always audited; namespaced ones in the current
namespace, or in all namespaces with -A. Exit code 1 when something is found.`,
		Example: `  teardown orphans -A
  teardown orphans -A -o json | jq '.orphans[].object'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), flags, out)
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "audit namespaced objects in every namespace")
	cmdutil.OutputFlag(cmd, &o.Output, "text", "json")
	return cmd
}

// Run gathers, audits and renders.
func (o *Options) Run(ctx context.Context, flags *genericclioptions.ConfigFlags, out io.Writer) error {
	clients, ns, err := resource.Connect(ctx, flags)
	if err != nil {
		return err
	}
	if o.AllNamespaces {
		ns = ""
	}
	facts, err := Gather(ctx, clients, ns, time.Now())
	if err != nil {
		return err
	}
	found := Find(facts)
	if err := cmdutil.WriteAnswer(out, o.Output, found, Render, RenderJSON); err != nil {
		return err
	}
	if len(found) > 0 {
		return &cmdutil.FindingError{Summary: cmdutil.Plural(len(found), "orphan found", "orphans found")}
	}
	return nil
}
