package why

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Options are the flags of `teardown why`.
type Options struct {
	Output string
}

// NewCommand returns `teardown why`.
func NewCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "why KIND/NAME | helm/RELEASE",
		Short: "Explain why an object or namespace is not gone, or what would hold its deletion",
		Long: `why explains why an object or a namespace is stuck deleting (or, before a
delete, what would hold it): each finalizer, who wrote it, what removes it
and whether that runs; a namespace's spec.finalizers and remaining content
grouped by kind with the reason for each; liens; unavailable APIServices
and failing conversion webhooks (and whether their server can come back);
fail-closed webhooks without endpoints; pods on dead nodes; the pods using
a claim; a definition's custom resources; foreground deletion waiting on
dependents. helm/RELEASE is the newest record of a Helm release in the
namespace: why helm install or helm upgrade --install of that name is
refused while the record is kept (which lien, which holder, since when).
It never advises removing one of Kubernetes' own finalizers,
and gives a removal command only when the remover is confirmed gone.
Exit code 1 when something holds the deletion.`,
		Example: `  teardown why namespace/foohome
  teardown why foo.example.com/myfoo -n foohome
  teardown why helm/myfoo -n foohome
  kubectl teardown why deployment my-operator -n operators -o json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Run(cmd.Context(), flags, args, out)
		},
	}
	cmdutil.OutputFlag(cmd, &o.Output, "text", "json")
	return cmd
}

// Run gathers, diagnoses and renders.
func (o *Options) Run(ctx context.Context, flags *genericclioptions.ConfigFlags, args []string, out io.Writer) error {
	if err := resource.CheckArgs(args); err != nil {
		return err
	}
	clients, ns, err := resource.Connect(ctx, flags)
	if err != nil {
		return err
	}
	var target *cliresource.Info
	if release, ok := helmReleaseArg(args); ok {
		target, err = getHelmRecord(ctx, clients, ns, release)
	} else {
		target, err = resource.Get(clients, ns, args...)
	}
	if err != nil {
		return err
	}
	facts, err := Gather(ctx, clients, target, time.Now())
	if err != nil {
		return err
	}
	d := Diagnose(facts)
	if err := cmdutil.WriteAnswer(out, o.Output, d, Render, RenderJSON); err != nil {
		return err
	}
	if n := d.Blocking(); n > 0 {
		return &cmdutil.FindingError{Summary: fmt.Sprintf("%s: %s", resource.Ref(target), cmdutil.Plural(n, "finding holds its deletion", "findings hold its deletion"))}
	}
	return nil
}
