// Package cli assembles the teardown command line: the root command, its
// verbs, and the mapping of their errors to the exit codes of the contract.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/controller"
	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/cli/install"
	"github.com/teardown-dev/teardown/internal/cli/local"
	"github.com/teardown-dev/teardown/internal/cli/orphans"
	"github.com/teardown-dev/teardown/internal/cli/plan"
	"github.com/teardown-dev/teardown/internal/cli/run"
	"github.com/teardown-dev/teardown/internal/cli/suggest"
	"github.com/teardown-dev/teardown/internal/cli/uninstall"
	"github.com/teardown-dev/teardown/internal/cli/why"
)

// Main runs the command line args (args[0] is the program) and returns the
// exit code. Invoked as kubectl-teardown, it presents itself as the kubectl
// plugin `kubectl teardown`.
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	root := NewRootCommand(programName(args[0]), out, errOut)
	root.SetArgs(args[1:])
	err := execute(ctx, root)
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		// Errors are one line (cmdutil.Connect folds transport errors); a
		// failed control-plane start keeps its component logs below.
		fmt.Fprintf(errOut, "%s: %s\n", root.DisplayName(), strings.TrimRight(err.Error(), "\n"))
	}
	if errors.Is(err, pflag.ErrHelp) {
		return cmdutil.ExitOK
	}
	return cmdutil.ExitCode(err)
}

func programName(arg0 string) string {
	if strings.HasPrefix(filepath.Base(arg0), "kubectl-teardown") {
		return "kubectl teardown"
	}
	return "teardown"
}

// NewRootCommand returns the teardown command with all its verbs.
func NewRootCommand(name string, out, errOut io.Writer) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:         "teardown",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: name},
		Short:       "Safe, ordered and complete deletion for Kubernetes",
		Long: `teardown makes deletion in Kubernetes safe, ordered and complete: liens keep
objects that are still needed, cross-scope owners are garbage-collected,
uninstalls run in order, and stuck deletions are explained.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		local.NewCommand(out, errOut),
		demo.NewCommand(flags, out, errOut),
		controller.NewCommand(flags),
		install.NewCommand(flags, out, errOut),
		uninstall.NewCommand(flags, out, errOut),
		newVersionCommand(flags, out),
		why.NewCommand(flags, out),
		orphans.NewCommand(flags, out),
		plan.NewCommand(flags, out),
		run.NewCommand(flags, out),
		suggest.NewCommand(flags, out),
	)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.UsageError{Err: err} })
	markUsageErrors(root)
	return root
}

// ranKey marks, in a command's context, that its RunE was entered: any
// error before that (unknown verb or flag, wrong arguments) is a usage error.
type ranKey struct{}

type ran struct{ entered bool }

func execute(ctx context.Context, root *cobra.Command) error {
	r := &ran{}
	err := root.ExecuteContext(context.WithValue(ctx, ranKey{}, r))
	if err != nil && !r.entered && !errors.Is(err, pflag.ErrHelp) {
		var usage *cmdutil.UsageError
		if !errors.As(err, &usage) {
			err = &cmdutil.UsageError{Err: err}
		}
	}
	return err
}

// markUsageErrors wraps every RunE to record that it was entered, and makes
// a command that needs a verb fail as a usage error without one.
func markUsageErrors(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		markUsageErrors(c)
	}
	if cmd.RunE == nil && cmd.Run == nil && cmd.HasSubCommands() && cmd.HasParent() {
		cmd.Args = cobra.NoArgs
		cmd.RunE = func(c *cobra.Command, _ []string) error {
			return cmdutil.Usagef("%s needs a verb: %s", c.CommandPath(), verbs(c))
		}
		return
	}
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if r, ok := c.Context().Value(ranKey{}).(*ran); ok {
				r.entered = true
			}
			return run(c, args)
		}
	}
}

func verbs(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}
