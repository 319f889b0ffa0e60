package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/podtoken"
)

// HelmUninstall runs `helm uninstall RELEASE -n NAMESPACE` as a user types
// it, plays its pre-delete hook's Job meanwhile, and returns what helm did
// and the exit codes of the hook's attempts.
func (e *Env) HelmUninstall(ctx context.Context) (Result, []int, error) {
	return e.HelmUninstallBy(ctx, func() Result { return e.Command(6*time.Minute, e.Helm, "uninstall", Release, "-n", Namespace) })
}

// HelmUninstallBy is HelmUninstall with helm run by uninstall: the docs'
// own command line, say.
func (e *Env) HelmUninstallBy(ctx context.Context, uninstall func() Result) (Result, []int, error) {
	done := make(chan Result, 1)
	go func() { done <- uninstall() }()
	job, err := e.waitJob(ctx, hookJob, time.Minute)
	var codes []int
	if err == nil {
		codes, err = e.playHook(ctx, job)
	}
	r := <-done
	e.opts.Log("$ helm uninstall %s -n %s: exit %d in %s (the hook's attempts: exit %v)\n%s", Release, Namespace, r.Code, r.Took.Round(time.Millisecond), codes, r.Out)
	return r, codes, err
}

// playHook plays the pre-delete hook Job as the job controller and a
// kubelet would: for each attempt (1 + backoffLimit at most), a Pod of the
// Job with a bound token of its ServiceAccount, its container's command
// and args run to the end; then the Job is reported complete, or failed
// with BackoffLimitExceeded. It returns each attempt's exit code.
func (e *Env) playHook(ctx context.Context, job *batchv1.Job) ([]int, error) {
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}
	c := job.Spec.Template.Spec.Containers[0]
	limit := int32(6) // the API's default
	if job.Spec.BackoffLimit != nil {
		limit = *job.Spec.BackoffLimit
	}
	var codes []int
	now := metav1.Now()
	for attempt := int32(0); attempt <= limit; attempt++ {
		tmpl := job.Spec.Template.DeepCopy()
		tmpl.Spec.NodeName = node
		id, err := podtoken.NewForOwner(ctx, e.opts.Config, job.Namespace, owner, *tmpl)
		if err != nil {
			return codes, err
		}
		dir, envv, err := e.container(ctx, fmt.Sprintf("hook-%d", attempt), id, c)
		if err != nil {
			return codes, err
		}
		cmd := exec.CommandContext(ctx, e.Rel.Path(c.Command[0]), c.Args...)
		cmd.Env, cmd.Dir = envv, dir
		started := time.Now()
		out, err := cmd.CombinedOutput()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			return codes, fmt.Errorf("running the hook: %w", err)
		}
		codes = append(codes, code)
		e.opts.Log("pre-delete hook, attempt %d (pod %s): %s %s: exit %d in %s\n%s", attempt+1, id.Pod.Name, c.Command[0], strings.Join(c.Args, " "), code, time.Since(started).Round(time.Millisecond), out)
		phase := corev1.PodSucceeded
		if code != 0 {
			phase = corev1.PodFailed
		}
		pod := id.Pod.DeepCopy()
		pod.Status.Phase = phase
		if _, err := e.Kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			e.opts.Log("reporting the hook's pod %s: %v", pod.Name, err)
		}
		if code == 0 {
			j, err := e.Kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return codes, err
			}
			return codes, helmcli.CompleteJob(ctx, e.Kube.BatchV1().Jobs(job.Namespace), j)
		}
	}
	j, err := e.Kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		return codes, err
	}
	end := metav1.Now()
	j.Status = batchv1.JobStatus{
		StartTime: &now, Failed: limit + 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
		},
	}
	if _, err := e.Kube.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		return codes, fmt.Errorf("reporting job %s failed: %w", job.Name, err)
	}
	return codes, nil
}

// waitJob waits for the Job name to be created (by helm).
func (e *Env) waitJob(ctx context.Context, name string, timeout time.Duration) (*batchv1.Job, error) {
	var job *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := e.Kube.BatchV1().Jobs(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, client404(err)
		}
		job = j
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for job %s: %w", name, err)
	}
	return job, nil
}
