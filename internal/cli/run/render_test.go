package run

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

func TestStepLineAndSummary(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	spec := &v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{
		{Name: "inhibit-webhooks", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{"sriov-webhook"}}},
		{Name: "delete-networks", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "sriovnetwork.openshift.io/v1", Kind: "SriovNetwork", AllNamespaces: true, Selector: &metav1.LabelSelector{}}}},
	}}
	status := v1alpha1.TeardownStatus{
		Phase:       v1alpha1.PhaseFailed,
		CurrentStep: "delete-networks",
		Steps: []v1alpha1.StepStatus{
			{Name: "inhibit-webhooks", State: v1alpha1.StepSucceeded, Matched: 1, StartedAt: at(0), FinishedAt: at(time.Second)},
			{Name: "delete-networks", State: v1alpha1.StepFailed, Matched: 2, Deleted: 1, Remaining: 1, StartedAt: at(time.Second), FinishedAt: at(5 * time.Minute),
				Pending: []string{"SriovNetwork tenant-b/net-b"}, Message: "timed out after 5m0s with 1 pending: SriovNetwork tenant-b/net-b"},
		},
	}
	for _, tc := range []struct {
		i    int
		want string
	}{
		{0, "[1/2] inhibit-webhooks Succeeded: inhibit webhooks [sriov-webhook] (Ignore) (1s)"},
		{1, "[2/2] delete-networks Failed: delete [SriovNetwork] in all namespaces; deleted 1, remaining 1 (4m59s)"},
	} {
		if diff := cmp.Diff(tc.want, StepLine(spec, status, tc.i, t0.Add(time.Hour))); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", tc.i, diff)
		}
	}
	want := `plan failed at step delete-networks: timed out after 5m0s with 1 pending: SriovNetwork tenant-b/net-b
  pending: SriovNetwork tenant-b/net-b
once fixed, continue with: teardown run -f plan.yaml --from-step delete-networks
`
	if diff := cmp.Diff(want, Summary("plan.yaml", spec, status, 5*time.Minute)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	status.Phase = v1alpha1.PhaseSucceeded
	if diff := cmp.Diff("plan succeeded: 2 step(s) in 5m0s\n", Summary("plan.yaml", spec, status, 5*time.Minute)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestLoadRefusesBadPlans(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"not a teardown": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", `want apiVersion teardown.dev/v1alpha1 and kind Teardown`},
		"unknown field":  {"apiVersion: teardown.dev/v1alpha1\nkind: Teardown\nmetadata: {name: x}\nspec: {stepz: []}\n", `unknown field "stepz"`},
		"two actions": {`apiVersion: teardown.dev/v1alpha1
kind: Teardown
metadata: {name: x}
spec:
  steps:
  - name: a
    delete: {apiVersion: v1, kind: ConfigMap, namespace: a, name: b}
    waitFor: {apiVersion: v1, kind: ConfigMap, namespace: a, name: b}
`, "spec.steps[0]: Invalid value: \"a\": set exactly one action"},
	} {
		t.Run(name, func(t *testing.T) {
			f := t.TempDir() + "/plan.yaml"
			if err := writeFile(f, tc.yaml); err != nil {
				t.Fatal(err)
			}
			_, err := Load(f)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
