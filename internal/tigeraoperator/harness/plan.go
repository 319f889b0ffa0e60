package harness

import (
	"context"

	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// Plan is the name of the Teardown in examples/tigera-operator.
const Plan = "tigera-operator-uninstall"

// WaitArmed waits up to a minute for Teardown name to be armed.
func (e *Env) WaitArmed(ctx context.Context, name string) error {
	return sriov.WaitArmed(ctx, e.Dyn, name, e.Operator)
}

// WaitPlanEnded waits up to three minutes for Teardown name to succeed,
// fail or be gone, and returns its phase and conditions' messages.
func (e *Env) WaitPlanEnded(ctx context.Context, name string) string {
	return sriov.WaitPlanEnded(ctx, e.Dyn, name)
}

// WaitRecordsGone waits up to a minute for the release's records to be
// gone.
func (e *Env) WaitRecordsGone(ctx context.Context) error {
	return sriov.WaitRecordsGone(ctx, e.Kube, Namespace, Release)
}
