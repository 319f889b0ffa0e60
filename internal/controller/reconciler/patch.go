package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatus writes what changed in obj's status since before (obj as
// read, or a copy with the status it had then) in one merge patch of the
// status subresource, with an optimistic lock: a status computed from a
// read older than someone else's write fails with a conflict instead of
// writing over it. Nothing is sent when the status did not change. obj's
// metadata is what the lock is taken on, so that PatchMeta calls in
// between are no conflict.
func PatchStatus(ctx context.Context, c client.Client, obj, before client.Object) error {
	now, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("reading the status of %T: %w", obj, err)
	}
	then, err := runtime.DefaultUnstructuredConverter.ToUnstructured(before)
	if err != nil {
		return fmt.Errorf("reading the status of %T: %w", before, err)
	}
	if equality.Semantic.DeepEqual(now["status"], then["status"]) {
		return nil
	}
	// The base is obj with the status it had: the patch is the status
	// alone, locked on obj's resourceVersion.
	delete(now, "status")
	if s, ok := then["status"]; ok {
		now["status"] = s
	}
	base, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copying %T", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(now, base); err != nil {
		return fmt.Errorf("copying %T: %w", obj, err)
	}
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// PatchMeta patches obj's metadata as change makes it, with an optimistic
// lock, and leaves obj's status as it is in memory (for PatchStatus at
// the end of the reconcile): change is made on a copy, and only the
// copy's metadata, as the API server returned it, is taken back.
func PatchMeta[O client.Object](ctx context.Context, c client.Client, obj O, change func(O)) error {
	cp, ok := obj.DeepCopyObject().(O)
	if !ok {
		return fmt.Errorf("copying %T", obj)
	}
	dst, src := objectMeta(obj), objectMeta(cp)
	if dst == nil || src == nil {
		return fmt.Errorf("%T has no ObjectMeta", obj)
	}
	base, _ := cp.DeepCopyObject().(O)
	change(cp)
	if err := c.Patch(ctx, cp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	*dst = *src
	return nil
}

// objectMeta is o's ObjectMeta, nil if it embeds none.
func objectMeta(o any) *metav1.ObjectMeta {
	if a, ok := o.(metav1.ObjectMetaAccessor); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return m
		}
	}
	return nil
}
