//go:build integration

package e2e

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// TestDemoWhyStuckNamespace replays the demo's last scenario: a namespace
// stuck on a finalizer nobody removes, explained by teardown why, then
// cleaned up.
func TestDemoWhyStuckNamespace(t *testing.T) {
	var s *demo.Scenario
	for i := range demo.Scenarios {
		if demo.Scenarios[i].Name == "why-stuck-namespace" {
			s = &demo.Scenarios[i]
		}
	}
	if s == nil {
		t.Fatal("scenario why-stuck-namespace is not in demo.Scenarios")
	}
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Run(t.Context(), env)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"namespace/stuckhome"}, o.Left); diff != "" {
		t.Errorf("stuck objects (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		"teardown why namespace/stuckhome:",
		"[BLOCKING] finalizer example.com/uninstall-helm-release: nobody will remove it",
		"set by:     foo-operator",
		"foo.example.com ×1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if !strings.Contains(o.Summary, "STUCK Terminating") {
		t.Errorf("summary %q", o.Summary)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Get(t.Context(), "stuckhome", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the scenario did not clean up namespace stuckhome: %v", err)
	}
}
