package heartbeat

import (
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

const (
	// LeaseName is the heartbeat Lease's name.
	LeaseName = "teardown-controller-heartbeat"
	// Interval is how often the Lease is renewed.
	Interval = 10 * time.Second
	// Duration is how long a renewal counts: four intervals.
	Duration = 40 * time.Second
)

// Heartbeat renews the heartbeat Lease in Namespace while the manager runs
// its controllers. Add it to a manager with mgr.Add.
type Heartbeat struct {
	Client    kubernetes.Interface
	Namespace string
	// Identity is the Lease's holder: hostname_uuid, as leader election's.
	Identity string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns the heartbeat of one process in namespace.
func New(client kubernetes.Interface, namespace string) *Heartbeat {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return &Heartbeat{Client: client, Namespace: namespace, Identity: host + "_" + string(uuid.NewUUID())}
}

// NeedLeaderElection is true: only the replica that runs the controllers
// beats.
func (h *Heartbeat) NeedLeaderElection() bool { return true }

// Start renews the Lease every Interval until ctx ends, then expires it.
// A failed renewal is logged (once per distinct error) and tried again
// next interval: the heartbeat never stops the controllers.
func (h *Heartbeat) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("lease", h.Namespace+"/"+LeaseName)
	last := ""
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		err := h.Beat(ctx)
		switch {
		case err != nil && err.Error() != last && ctx.Err() == nil:
			log.Error(err, "renewing the heartbeat Lease: teardown why cannot tell that this controller runs")
			last = err.Error()
		case err == nil && last != "":
			log.Info("heartbeat Lease renewed again")
			last = ""
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := h.Expire(stop); err != nil {
				log.Error(err, "expiring the heartbeat Lease on stop")
			}
			return nil
		case <-t.C:
		}
	}
}

func (h *Heartbeat) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Beat renews the Lease once, creating it if needed.
func (h *Heartbeat) Beat(ctx context.Context) error {
	leases := h.Client.CoordinationV1().Leases(h.Namespace)
	now := metav1.NewMicroTime(h.now())
	l, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: h.Namespace, Labels: map[string]string{v1alpha1.HeartbeatLabel: "controller"}}}
		h.fill(l, now)
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating lease %s/%s: %w", h.Namespace, LeaseName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease %s/%s: %w", h.Namespace, LeaseName, err)
	}
	h.fill(l, now)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("renewing lease %s/%s: %w", h.Namespace, LeaseName, err)
	}
	return nil
}

func (h *Heartbeat) fill(l *coordinationv1.Lease, now metav1.MicroTime) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[v1alpha1.HeartbeatLabel] = "controller"
	if ptr.Deref(l.Spec.HolderIdentity, "") != h.Identity {
		l.Spec.AcquireTime = &now
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.HolderIdentity = ptr.To(h.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(Duration / time.Second))
	l.Spec.RenewTime = &now
}

// Expire releases the Lease now, if this process still holds it: a Lease
// without a holder is not fresh.
func (h *Heartbeat) Expire(ctx context.Context) error {
	leases := h.Client.CoordinationV1().Leases(h.Namespace)
	l, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != h.Identity {
		return nil // another replica beats now
	}
	// As client-go's leader election releases a Lease: no holder (which
	// Fresh reads as expired at once), and the least duration.
	l.Spec.HolderIdentity = nil
	l.Spec.LeaseDurationSeconds = ptr.To(int32(1))
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Fresh reports whether the Lease has a holder whose last renewal counts
// at now.
func Fresh(l *coordinationv1.Lease, now time.Time) bool {
	if ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).After(now)
}
