package run

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

func newRunner(cfg *rest.Config) (*runner.Runner, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return runner.New(cfg, scheme)
}

// handOver gives a Running or Failed in-cluster Teardown of the same name
// to the controller (with --from-step, by the run-from-step annotation)
// and returns it; nil means the plan runs here.
func (o *Options) handOver(ctx context.Context, r *runner.Runner, plan *v1alpha1.Teardown, p *progress) (*v1alpha1.Teardown, error) {
	t := &v1alpha1.Teardown{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: plan.Name}, t)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading teardown %s: %w", plan.Name, err)
	}
	switch t.Status.Phase {
	case v1alpha1.PhaseRunning:
	case v1alpha1.PhaseFailed:
		if o.FromStep == "" {
			return nil, cmdutil.Usagef("teardown %s failed at step %s: fix what is pending, then continue with --from-step %s", t.Name, t.Status.CurrentStep, t.Status.CurrentStep)
		}
	default:
		return nil, nil
	}
	*plan = *t // the controller runs the cluster's copy
	p.spec = &t.Spec
	if o.FromStep != "" {
		patch := client.MergeFrom(t.DeepCopy())
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[v1alpha1.RunFromStepAnnotation] = o.FromStep
		if err := r.Client.Patch(ctx, t, patch); err != nil {
			return nil, fmt.Errorf("asking the controller to resume teardown %s: %w", t.Name, err)
		}
	}
	return t, nil
}

// follow shows an in-cluster Teardown's progress until it finished.
func (o *Options) follow(ctx context.Context, r *runner.Runner, name string, p *progress) (v1alpha1.TeardownStatus, error) {
	var status v1alpha1.TeardownStatus
	err := wait.PollUntilContextCancel(ctx, o.Interval, true, func(ctx context.Context) (bool, error) {
		t := &v1alpha1.Teardown{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, t); err != nil {
			return false, fmt.Errorf("reading teardown %s: %w", name, err)
		}
		if t.Annotations[v1alpha1.RunFromStepAnnotation] != "" {
			return false, nil // not taken yet
		}
		status = t.Status
		p.update(status)
		return status.Phase == v1alpha1.PhaseSucceeded || status.Phase == v1alpha1.PhaseFailed, nil
	})
	return status, err
}

// progress prints step lines: on a terminal the running step's line is
// redrawn in place; otherwise a line is printed whenever it changes.
type progress struct {
	out     io.Writer
	live    bool
	spec    *v1alpha1.TeardownSpec
	started time.Time
	last    string
	lastIdx int
	open    bool
}

func (p *progress) update(status v1alpha1.TeardownStatus) {
	now := time.Now()
	for i, s := range p.spec.Steps {
		var st v1alpha1.StepStatus
		for _, x := range status.Steps {
			if x.Name == s.Name {
				st = x
			}
		}
		if st.State == "" || st.State == v1alpha1.StepPending || i < p.lastIdx {
			continue
		}
		line := StepLine(p.spec, status, i, now)
		finished := st.State != v1alpha1.StepRunning
		if p.live {
			fmt.Fprintf(p.out, "\r\033[K%s", line)
			p.open = true
			if finished {
				fmt.Fprintln(p.out)
				p.open = false
				p.lastIdx = i + 1
			}
			continue
		}
		// Plain: a line when something but the elapsed time changed.
		key := fmt.Sprintf("%d %s %d %d %d", i, st.State, st.Matched, st.Deleted, st.Remaining)
		if key != p.last {
			fmt.Fprintln(p.out, line)
			p.last = key
		}
		if finished {
			p.lastIdx = i + 1
		}
	}
}

func (p *progress) done() {
	if p.open {
		fmt.Fprintln(p.out)
		p.open = false
	}
}
