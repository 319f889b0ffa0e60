package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// SelfOption changes SelfUninstall.
type SelfOption func(*selfOptions)

type selfOptions struct {
	interval  time.Duration
	namespace string
	pod       string
}

// WithInterval sets how often the Deployment and the running plan are
// checked (default 2s).
func WithInterval(d time.Duration) SelfOption { return func(o *selfOptions) { o.interval = d } }

// WithPod names the operator's own pod instead of the POD_NAMESPACE and
// POD_NAME environment variables (set them from the downward API).
func WithPod(namespace, name string) SelfOption {
	return func(o *selfOptions) { o.namespace, o.pod = namespace, name }
}

// SelfUninstall makes an operator run plan when its own Deployment is
// deleted: it finds the Deployment (POD_NAMESPACE/POD_NAME, then the pod's
// controller chain ReplicaSet -> Deployment), protects plan's keepUntilDone
// with a Deny ClusterLien (their DELETEs are refused until the plan
// finished, so that its ServiceAccount's tokens keep working; the
// Deployment itself must not be listed), holds the finalizer teardown.dev/teardown-<plan
// name> (TriggerFinalizer) on the Deployment, and, once the Deployment is
// being deleted, runs the steps in this process (only in the leader)
// before letting the Deployment go. Its finalizer is its own: Teardowns on
// the same Deployment hold it by theirs, and the Deployment goes when the
// last plan finished. plan's name must differ from every Teardown's (it
// names the finalizer and the keepUntilDone ClusterLien teardown-<name>).
// The Deployment is deleted with background propagation (the default of
// kubectl and Helm; teardown's policy refuses a foreground delete of a
// held trigger): its pods, and so the operator, keep running until the
// plan finished. Then it deletes what keepUntilDone kept (see letGo) and
// lets the Deployment go. A failed plan keeps the finalizer and is run
// again from its first step after a minute (steps are idempotent).
//
// The operator's service account needs: get on its pod and ReplicaSet,
// get and patch on its Deployment, create, get, update and delete on
// clusterliens.teardown.dev, get, list and delete on the kinds of
// keepUntilDone, and whatever its plan deletes or patches.
func SelfUninstall(mgr manager.Manager, plan *v1alpha1.Teardown, opts ...SelfOption) error {
	o := selfOptions{interval: 2 * time.Second, namespace: os.Getenv("POD_NAMESPACE"), pod: os.Getenv("POD_NAME")}
	for _, opt := range opts {
		opt(&o)
	}
	if o.namespace == "" || o.pod == "" {
		return errors.New("self-uninstall needs the operator's pod: set POD_NAMESPACE and POD_NAME from the downward API")
	}
	if errs := validation.IsDNS1123Subdomain(plan.Name); len(errs) > 0 {
		return fmt.Errorf("self-uninstall plan name %q: %s", plan.Name, strings.Join(errs, "; "))
	}
	if errs := teardown.Validate(&plan.Spec); len(errs) > 0 {
		return fmt.Errorf("self-uninstall plan %s: %w", plan.Name, errs.ToAggregate())
	}
	s := &self{r: ForManager(mgr), plan: plan.DeepCopy(), o: o}
	return mgr.Add(manager.RunnableFunc(s.run))
}

// self reads live (s.r.Reader), as the runner does: the operator's
// service account may get its pod, ReplicaSet and Deployment, not list or
// watch them, and a cache of them would hold every pod of the cluster.
type self struct {
	r    *Runner
	plan *v1alpha1.Teardown
	o    selfOptions
}

func (s *self) run(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("self-uninstall").WithValues("plan", s.plan.Name)
	var dep *appsv1.Deployment
	if err := wait.PollUntilContextCancel(ctx, s.o.interval, true, func(ctx context.Context) (bool, error) {
		var err error
		dep, err = s.arm(ctx)
		if err != nil {
			log.Error(err, "arming the self-uninstall plan")
			return false, nil
		}
		return dep != nil, nil
	}); err != nil {
		return nil // stopped
	}
	log.Info("armed", "deployment", client.ObjectKeyFromObject(dep))
	for {
		// Wait for the Deployment's deletion.
		if err := wait.PollUntilContextCancel(ctx, s.o.interval, true, func(ctx context.Context) (bool, error) {
			err := s.r.Reader.Get(ctx, client.ObjectKeyFromObject(dep), dep)
			return err == nil && !dep.DeletionTimestamp.IsZero(), nil
		}); err != nil {
			return nil
		}
		log.Info("the operator's Deployment is being deleted: running the plan")
		status, err := s.r.runSteps(ctx, s.plan.Name, &s.plan.Spec, v1alpha1.TeardownStatus{}, s.o.interval, nil)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && status.Phase == v1alpha1.PhaseSucceeded {
			log.Info("plan succeeded: deleting what keepUntilDone kept, releasing the Deployment")
			return s.letGo(ctx, dep, status.CompletedAt.Time)
		}
		log.Error(err, "plan did not succeed; the Deployment is kept, retrying in a minute", "step", status.CurrentStep)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Minute):
		}
	}
}

// arm finds the operator's Deployment, protects keepUntilDone and holds
// the finalizer; it returns the Deployment once all of that holds.
func (s *self) arm(ctx context.Context) (*appsv1.Deployment, error) {
	dep, err := s.ownDeployment(ctx)
	if err != nil {
		return nil, err
	}
	if i := teardown.Keeps(s.plan.Spec.KeepUntilDone, appsv1.SchemeGroupVersion.WithKind("Deployment"), dep); i >= 0 {
		return nil, fmt.Errorf("self-uninstall plan %s: spec.keepUntilDone[%d] keeps the operator's own Deployment %s/%s, which triggers the plan: its DELETE would be refused and the plan never start; the plan holds it by a finalizer already: remove it from keepUntilDone", s.plan.Name, i, dep.Namespace, dep.Name)
	}
	if _, err := s.r.Keep(ctx, s.plan.Name, s.plan.Spec.KeepUntilDone); err != nil {
		return nil, err
	}
	if patch := client.MergeFromWithOptions(dep.DeepCopy(), client.MergeFromWithOptimisticLock{}); dep.DeletionTimestamp.IsZero() && teardown.Hold(dep, s.plan.Name) {
		if err := s.r.Client.Patch(ctx, dep, patch); err != nil {
			return nil, fmt.Errorf("holding deployment %s/%s: %w", dep.Namespace, dep.Name, err)
		}
	}
	return dep, nil
}

// ownDeployment follows the pod's controller references to its Deployment.
func (s *self) ownDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	pod := &corev1.Pod{}
	if err := s.r.Reader.Get(ctx, client.ObjectKey{Namespace: s.o.namespace, Name: s.o.pod}, pod); err != nil {
		return nil, fmt.Errorf("reading the operator's pod %s/%s: %w", s.o.namespace, s.o.pod, err)
	}
	rsRef := metav1.GetControllerOf(pod)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return nil, fmt.Errorf("pod %s/%s is not controlled by a ReplicaSet", pod.Namespace, pod.Name)
	}
	rs := &appsv1.ReplicaSet{}
	if err := s.r.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: rsRef.Name}, rs); err != nil {
		return nil, fmt.Errorf("reading replica set %s/%s: %w", pod.Namespace, rsRef.Name, err)
	}
	depRef := metav1.GetControllerOf(rs)
	if depRef == nil || depRef.Kind != "Deployment" {
		return nil, fmt.Errorf("replica set %s/%s is not controlled by a Deployment", rs.Namespace, rs.Name)
	}
	dep := &appsv1.Deployment{}
	if err := s.r.Reader.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: depRef.Name}, dep); err != nil {
		return nil, fmt.Errorf("reading deployment %s/%s: %w", rs.Namespace, depRef.Name, err)
	}
	if dep.UID != depRef.UID {
		return nil, fmt.Errorf("deployment %s/%s was re-created: not this pod's", dep.Namespace, dep.Name)
	}
	return dep, nil
}

// letGo ends a plan that succeeded: what keepUntilDone kept is handed
// over to a Defer lien held by the Deployment and deleted (accepted, kept
// by the lien's finalizer: this process's token still works), then the
// Deployment is released, then the lien deleted; the kept objects go once
// the lien controller took its finalizer off (or once the Deployment is
// gone, if this process stops first). finished is when the last step
// finished: objects made since were not kept, and stay.
func (s *self) letGo(ctx context.Context, dep *appsv1.Deployment, finished time.Time) error {
	log := ctrl.LoggerFrom(ctx).WithName("self-uninstall").WithValues("plan", s.plan.Name)
	if len(s.plan.Spec.KeepUntilDone) > 0 {
		holder := v1alpha1.ClusterLienTarget{APIVersion: "apps/v1", Kind: "Deployment", Namespace: dep.Namespace, Name: dep.Name}
		if err := wait.PollUntilContextCancel(ctx, s.o.interval, true, func(ctx context.Context) (bool, error) {
			ok, err := s.r.handOver(ctx, s.plan.Name, holder)
			if err != nil {
				log.Error(err, "handing keepUntilDone over")
				return false, nil
			}
			if !ok {
				return false, nil
			}
			left, done, err := s.r.DeleteKept(ctx, s.plan.Spec.KeepUntilDone, finished)
			if err != nil {
				log.Error(err, "deleting what keepUntilDone kept")
				return false, nil
			}
			if len(left) > 0 {
				log.Info("kept objects another lien protects are left to it", "objects", left)
			}
			return done, nil
		}); err != nil {
			return nil
		}
	}
	if err := s.release(ctx, dep); err != nil {
		return err
	}
	if _, err := s.r.Release(ctx, s.plan.Name); err != nil {
		log.Error(err, "deleting the keepUntilDone lien (it is released once the Deployment is gone)")
	}
	return nil
}

func (s *self) release(ctx context.Context, dep *appsv1.Deployment) error {
	return wait.PollUntilContextCancel(ctx, s.o.interval, true, func(ctx context.Context) (bool, error) {
		if err := s.r.Reader.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return apierrors.IsNotFound(err), nil
		}
		patch := client.MergeFromWithOptions(dep.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if !teardown.Release(dep, s.plan.Name, false) {
			return true, nil
		}
		err := s.r.Client.Patch(ctx, dep, patch)
		return err == nil || apierrors.IsNotFound(err), nil
	})
}
