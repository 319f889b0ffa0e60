package plan

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Options are the flags of `teardown plan`.
type Options struct {
	Output  string
	Cascade string
}

// NewCommand returns `teardown plan`.
func NewCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "plan KIND/NAME",
		Short: "Dry-run a delete: what it would remove, keep, orphan or be blocked by, and in which order",
		Long: `plan shows, before a delete, what the delete would do: the tree of what
would be removed (native ownerReferences with the chosen --cascade, teardown
owner links, a namespace's content), what would be kept or orphaned
(deletion policies, other owners), what would block (liens, finalizers
nobody removes, fail-closed webhooks without endpoints), and the order.
The server's dry-run confirms admission for the target and for what the
plan finds blocked. Nothing is deleted. Exit code 1 when something blocks.`,
		Example: `  teardown plan namespace/foohome
  teardown plan deployment/web -n shop --cascade=foreground
  teardown plan ns/foohome -o mermaid > plan.mmd`,
		Args: cobra.RangeArgs(1, 2),
		PreRunE: func(*cobra.Command, []string) error {
			if _, err := o.propagation(); err != nil {
				return err
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Run(cmd.Context(), flags, args, out)
		},
	}
	cmdutil.OutputFlag(cmd, &o.Output, Formats...)
	cmd.Flags().StringVar(&o.Cascade, "cascade", "background", `as kubectl delete: "background", "foreground" or "orphan"`)
	return cmd
}

func (o *Options) propagation() (Propagation, error) {
	switch o.Cascade {
	case "background", "true":
		return Background, nil
	case "foreground":
		return Foreground, nil
	case "orphan", "false":
		return Orphan, nil
	}
	return "", cmdutil.Usagef("--cascade %q: want background, foreground or orphan", o.Cascade)
}

// Run gathers, plans and renders.
func (o *Options) Run(ctx context.Context, flags *genericclioptions.ConfigFlags, args []string, out io.Writer) error {
	if err := resource.CheckArgs(args); err != nil {
		return err
	}
	prop, err := o.propagation()
	if err != nil {
		return err
	}
	clients, ns, err := resource.Connect(ctx, flags)
	if err != nil {
		return err
	}
	target, err := resource.Get(clients, ns, args...)
	if err != nil {
		return err
	}
	facts, err := Gather(ctx, clients, target, prop, time.Now())
	if err != nil {
		return err
	}
	p := Build(facts)
	if err := Render(out, p, o.Output, isTerminal(out)); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	if len(p.Blocked) > 0 {
		return &cmdutil.FindingError{Summary: fmt.Sprintf("%s: %d objects would block the deletion", resource.Ref(target), len(p.Blocked))}
	}
	return nil
}

// isTerminal: colour only for a person at a terminal, and never with NO_COLOR.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
