package install

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/pkg/dependents"
)

// ownerLinksProbeUser is who the owner-links probe acts as: any user the
// policy does not trust (the controller users are not checked).
const ownerLinksProbeUser = "teardown:install-probe"

// waitOwnerLinksEnforced returns once kube-apiserver has loaded the policy
// teardown-owner-links: a dry-run CREATE of a dependent with a malformed
// owners annotation is refused. Nothing is stored.
func waitOwnerLinksEnforced(ctx context.Context, cfg *rest.Config) error {
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: ownerLinksProbeUser, Groups: []string{"system:masters", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(as)
	if err != nil {
		return err
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "teardown-owner-links-probe-",
		Labels:       map[string]string{dependents.OwnedLabel: "true"},
		Annotations:  map[string]string{dependents.OwnersAnnotation: "probe"},
	}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), "teardown-owner-links"), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver to enforce the owner-links policy: %w", err)
	}
	return nil
}
