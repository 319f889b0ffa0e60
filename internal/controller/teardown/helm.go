package teardown

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/helmrelease"
)

// A Teardown shipped in a Helm chart belongs to the release: Helm's
// annotations name it. `helm uninstall` of such a release deletes the
// trigger, the Teardown and everything else at once; the DELETEs of what
// keepUntilDone keeps are refused, so Helm stops before its purge and
// leaves the release record `uninstalling`, and a second `helm uninstall`
// would run the chart's pre-delete hooks again, as identities the plan has
// deleted meanwhile. Once the plan has finished, the controller does what
// that second `helm uninstall` would: when every object the release's
// manifest lists is gone or being deleted, it deletes the release's records
// (UID and resourceVersion preconditions). Post-delete hooks do not run.
const (
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// helmRecordWait is how long after its plan finished a Teardown waits for
// the rest of Helm's DELETEs to arrive before it leaves an uninstalling
// release to Helm.
const helmRecordWait = 2 * time.Minute

// finishHelmUninstall removes the records of t's Helm release when Helm's
// uninstall stopped at what the plan kept and everything else of the
// release is gone or going. It reports whether to look again later:
// objects of the release are still there, within helmRecordWait of the
// plan's end.
func (r *Reconciler) finishHelmUninstall(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	release, ns := helmRelease(t)
	if release == "" {
		return false, nil
	}
	var l corev1.SecretList
	if err := r.Reader.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(helmrelease.Labels(release))); err != nil {
		return false, fmt.Errorf("listing the records of Helm release %s/%s: %w", ns, release, err)
	}
	if len(l.Items) == 0 {
		return false, nil
	}
	latest := helmrelease.Latest(l.Items)
	if latest.Labels["status"] != "uninstalling" {
		return false, nil
	}
	objs, err := helmrelease.Objects(latest.Data["release"])
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("cannot read a Helm release record: left to Helm", "secret", ns+"/"+latest.Name, "err", err.Error())
		return false, nil
	}
	var left []string
	for _, o := range objs {
		still, err := r.stays(ctx, o, ns)
		if err != nil {
			return false, err
		}
		if still {
			left = append(left, o.GetKind()+" "+qualified(o.GetNamespace(), o.GetName()))
		}
	}
	if len(left) > 0 {
		finished := time.Now()
		if t.Status.CompletedAt != nil {
			finished = t.Status.CompletedAt.Time
		}
		if time.Since(finished) < helmRecordWait {
			return true, nil
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonHelmUninstallLeft, "Run",
			"Helm release %s/%s stays uninstalling: %s of its objects remain; `helm uninstall %s -n %s` finishes it", ns, release, strings.Join(left, ", "), release, ns)
		return false, nil
	}
	for i := range l.Items {
		s := &l.Items[i]
		err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
		if apierrors.IsForbidden(err) {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, v1alpha1.ReasonHelmUninstallLeft, "Run",
				"Helm release %s/%s stays uninstalling: teardown's controller may not delete its records (%v); grant it delete on secrets in namespace %s, or run `helm uninstall %s -n %s`", ns, release, err, ns, release, ns)
			return false, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting the record %s/%s of Helm release %s: %w", ns, s.Name, release, err)
		}
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonHelmUninstallFinished, "Run",
		"helm uninstall of release %s/%s had stopped at what this plan kept; the plan has finished and everything of the release is gone: its records are removed, as a second helm uninstall would", ns, release)
	return false, nil
}

// helmRelease is the Helm release t belongs to, by Helm's annotations:
// its name and namespace, empty unless that namespace is the trigger's
// (a release of the operator the plan uninstalls; whoever may write a
// Teardown cannot point it at another namespace's records).
func helmRelease(t *v1alpha1.Teardown) (string, string) {
	release, ns := t.Annotations[helmReleaseNameAnnotation], t.Annotations[helmReleaseNamespaceAnnotation]
	if release == "" || ns == "" || t.Spec.Trigger == nil || t.Spec.Trigger.Namespace != ns {
		return "", ""
	}
	return release, ns
}

// stays reports whether o, an object of a release installed in ns, still
// exists and is not being deleted.
func (r *Reconciler) stays(ctx context.Context, o *unstructured.Unstructured, ns string) (bool, error) {
	gvk := o.GroupVersionKind()
	m, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if apimeta.IsNoMatchError(err) {
		return false, nil // its CRD is gone, and with it the object
	}
	if err != nil {
		return false, err
	}
	key := client.ObjectKey{Name: o.GetName()}
	if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
		key.Namespace = o.GetNamespace()
		if key.Namespace == "" {
			key.Namespace = ns
		}
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	switch err := r.Reader.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %s %s: %w", gvk.Kind, qualified(key.Namespace, key.Name), err)
	}
	return live.DeletionTimestamp.IsZero(), nil
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// goWithTheRelease deletes t, Succeeded, when the namespace of the Helm
// release it belongs to is being deleted or gone: the release's records go
// with the namespace, and nothing else would delete a cluster-scoped
// object of a namespaced release. It reports whether it did.
func (r *Reconciler) goWithTheRelease(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	release, ns := helmRelease(t)
	if release == "" || !t.DeletionTimestamp.IsZero() {
		return false, nil
	}
	nsObj := &metav1.PartialObjectMetadata{}
	nsObj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.Reader.Get(ctx, client.ObjectKey{Name: ns}, nsObj)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	case nsObj.DeletionTimestamp.IsZero():
		return false, nil
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonHelmUninstallFinished, "Delete",
		"the plan has finished and the namespace %s of Helm release %s is deleted: this Teardown, an object of the release, goes with it", ns, release)
	uid, rv := t.UID, t.ResourceVersion
	if err := r.Client.Delete(ctx, t, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting teardown %s with its release: %w", t.Name, err)
	}
	return true, nil
}
