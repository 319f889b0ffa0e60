package run

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// Options are the flags of `teardown run`.
type Options struct {
	File     string
	Wait     bool
	Timeout  time.Duration
	FromStep string
	Interval time.Duration
	// Terminal forces the live display on (true) or off (false); nil
	// decides from out.
	Terminal *bool
}

// NewCommand returns `teardown run`.
func NewCommand(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "run -f PLAN.yaml [--wait] [--timeout 10m] [--from-step NAME]",
		Short: "Run a Teardown plan now, with progress; fit for a Helm pre-delete hook",
		Long: `Run the steps of a Teardown plan in order, now, and show their progress.
Exit 0 when every step finished, 1 when a step failed or the timeout passed
(what is pending is printed), 2 for a bad plan, 3 if the cluster cannot be
reached.

A plan whose Teardown exists in the cluster and is Running or Failed is run
by the controller: --from-step resumes it there, and run follows it. Any
other plan runs in this process; keepUntilDone is protected by a ClusterLien
while it runs (teardown's CRDs and controller must be installed for that).`,
		Example: `  teardown run -f uninstall.yaml --wait --timeout 10m
  teardown run -f uninstall.yaml --from-step delete-networks`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), flags, out)
		},
	}
	cmd.Flags().StringVarP(&o.File, "filename", "f", "", "the Teardown plan (YAML); - reads standard input")
	cmd.Flags().BoolVar(&o.Wait, "wait", true, "wait until the plan finished (false: hand an in-cluster plan to the controller and return)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up (exit 1) after this long")
	cmd.Flags().StringVar(&o.FromStep, "from-step", "", "start at this step; the ones before count as done")
	cmd.Flags().DurationVar(&o.Interval, "interval", time.Second, "how often to check progress")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// Load reads and validates a plan; errors name the field.
func Load(file string) (*v1alpha1.Teardown, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, cmdutil.Usagef("reading the plan: %w", err)
	}
	t := &v1alpha1.Teardown{}
	if err := yaml.UnmarshalStrict(data, t); err != nil {
		return nil, cmdutil.Usagef("%s is not a Teardown: %w", file, err)
	}
	if t.APIVersion != v1alpha1.GroupVersion.String() || t.Kind != "Teardown" {
		return nil, cmdutil.Usagef("%s: want apiVersion %s and kind Teardown, got %q %q", file, v1alpha1.GroupVersion, t.APIVersion, t.Kind)
	}
	if t.Name == "" {
		return nil, cmdutil.Usagef("%s: metadata.name: Required value", file)
	}
	if errs := teardown.Validate(&t.Spec); len(errs) > 0 {
		return nil, cmdutil.Usagef("%s: %w", file, errs.ToAggregate())
	}
	return t, nil
}

func (o *Options) terminal(out io.Writer) bool {
	if o.Terminal != nil {
		return *o.Terminal
	}
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Run runs the command.
func (o *Options) Run(ctx context.Context, flags *genericclioptions.ConfigFlags, out io.Writer) error {
	plan, err := Load(o.File)
	if err != nil {
		return err
	}
	if o.FromStep != "" {
		if err := teardown.ResumeFrom(&plan.Spec, &v1alpha1.TeardownStatus{}, o.FromStep); err != nil {
			return cmdutil.Usagef("--from-step: %w", err)
		}
	}
	cfg, err := cmdutil.Connect(ctx, flags)
	if err != nil {
		return err
	}
	r, err := newRunner(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p := &progress{out: out, live: o.terminal(out), spec: &plan.Spec, started: time.Now()}
	inCluster, err := o.handOver(ctx, r, plan, p)
	if err != nil {
		return err
	}
	var status v1alpha1.TeardownStatus
	if inCluster != nil {
		if !o.Wait {
			fmt.Fprintf(out, "teardown %s handed to the controller\n", plan.Name)
			return nil
		}
		status, err = o.follow(ctx, r, plan.Name, p)
	} else {
		if !o.Wait {
			return cmdutil.Usagef("--wait=false needs a Teardown %s in the cluster to hand over to", plan.Name)
		}
		if o.FromStep != "" {
			_ = teardown.ResumeFrom(&plan.Spec, &status, o.FromStep)
		}
		status, err = r.Run(ctx, plan.Name, &plan.Spec, status, o.Interval, p.update)
	}
	p.done()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("running teardown %s: %w", plan.Name, err)
	}
	fmt.Fprint(out, Summary(o.File, &plan.Spec, status, time.Since(p.started)))
	if status.Phase != v1alpha1.PhaseSucceeded {
		return &cmdutil.FindingError{Summary: fmt.Sprintf("teardown %s did not finish", plan.Name)}
	}
	return nil
}
