//go:build integration

package install_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// warnings records the warnings of every response (a rest.WarningHandler).
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, message)
}

// take returns the warnings recorded since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

// TestOwnerLinksProbeDrawsNoWarning: install's owner-links probe, a dry-run
// CREATE whose owners annotation ("probe") teardown-owner-links refuses,
// draws no warning from teardown-grants-warn-owned, which warns about links
// that are kept: once that policy warns about a well-formed link in
// teardown-system (the controller may not delete ConfigMaps there), the
// probe still gets none.
func TestOwnerLinksProbeDrawsNoWarning(t *testing.T) {
	ctx := t.Context()
	if err := install.Apply(ctx, cluster.RESTConfig(), install.Options{}, t.Output()); err != nil {
		t.Fatal(err)
	}
	cfg := cluster.RESTConfig()
	var w warnings
	cfg.WarningHandler = &w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	linked := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "linked-",
		Labels:       map[string]string{dependents.OwnedLabel: "true"},
		Annotations:  map[string]string{dependents.OwnersAnnotation: `[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"u1"}]`},
	}}
	testenv.Eventually(t, time.Minute, "teardown-grants-warn-owned to warn about a well-formed link", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(install.Namespace).Create(ctx, linked, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && strings.Contains(strings.Join(w.take(), "\n"), "teardown-grants-warn-owned"), nil
	})
	if err := install.WaitOwnerLinksEnforced(ctx, rest.CopyConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); len(got) > 0 {
		t.Errorf("install's owner-links probe drew warnings:\n%s", strings.Join(got, "\n"))
	}
}
