package lien

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Option changes the lien Protect writes.
type Option func(*options)

type options struct{ mode v1alpha1.LienMode }

// WithMode sets Deny (the default) or Defer.
func WithMode(m v1alpha1.LienMode) Option { return func(o *options) { o.mode = m } }

// Protect keeps obj while holder exists: it creates, or updates, a Lien in
// obj's namespace when both are namespaced in the same namespace, and a
// ClusterLien otherwise. The lien is named after the pair, so calling
// Protect again (every reconcile) changes nothing. The teardown controller
// does the rest; Release, or the holder's deletion, ends it.
func Protect(ctx context.Context, c client.Client, obj, holder client.Object, reason string, opts ...Option) (client.Object, error) {
	o := options{mode: v1alpha1.LienModeDeny}
	for _, opt := range opts {
		opt(&o)
	}
	objGVK, holderGVK, err := kinds(c, obj, holder)
	if err != nil {
		return nil, err
	}
	name := Name(obj, holder)
	if obj.GetNamespace() != "" && obj.GetNamespace() == holder.GetNamespace() {
		l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: name}}
		_, err := controllerutil.CreateOrUpdate(ctx, c, l, func() error {
			l.Spec = v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: objGVK.GroupVersion().String(), Kind: objGVK.Kind, Name: obj.GetName()}},
				HeldBy:  []v1alpha1.LienTarget{{APIVersion: holderGVK.GroupVersion().String(), Kind: holderGVK.Kind, Name: holder.GetName()}},
				Mode:    o.mode,
				Reason:  reason,
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("writing lien %s/%s: %w", l.Namespace, l.Name, err)
		}
		return l, nil
	}
	l := &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, l, func() error {
		l.Spec = v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: objGVK.GroupVersion().String(), Kind: objGVK.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}},
			HeldBy:  []v1alpha1.ClusterLienTarget{{APIVersion: holderGVK.GroupVersion().String(), Kind: holderGVK.Kind, Namespace: holder.GetNamespace(), Name: holder.GetName()}},
			Mode:    o.mode,
			Reason:  reason,
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing cluster lien %s: %w", l.Name, err)
	}
	return l, nil
}

// Release deletes the lien that Protect wrote for obj and holder, if any.
func Release(ctx context.Context, c client.Client, obj, holder client.Object) error {
	if _, _, err := kinds(c, obj, holder); err != nil {
		return err
	}
	var l client.Object = &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: Name(obj, holder)}}
	if obj.GetNamespace() != "" && obj.GetNamespace() == holder.GetNamespace() {
		l = &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: Name(obj, holder)}}
	}
	if err := c.Delete(ctx, l); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting lien %s: %w", l.GetName(), err)
	}
	return nil
}

// Name is the name Protect gives the lien of obj held by holder: readable,
// at most 63 characters, and unique for the pair.
func Name(obj, holder client.Object) string {
	return lienName("keep-", obj.GetName(), 50,
		obj.GetObjectKind().GroupVersionKind().GroupKind().String(), obj.GetNamespace(), obj.GetName(),
		holder.GetObjectKind().GroupVersionKind().GroupKind().String(), holder.GetNamespace(), holder.GetName())
}

// lienName is prefix and readable (lower case, cut to maxLen characters),
// then a hash of every part: readable, within 63 characters, and unique for
// the parts.
func lienName(prefix, readable string, maxLen int, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "/")))
	base := strings.Trim(strings.ToLower(strings.ReplaceAll(readable, ".", "-")), "-")
	if len(base) > maxLen {
		base = strings.Trim(base[:maxLen], "-")
	}
	return prefix + base + "-" + hex.EncodeToString(h[:])[:6]
}

// kinds finds both objects' kinds from the client's scheme, setting them on
// the objects so that Name sees them.
func kinds(c client.Client, obj, holder client.Object) (schema.GroupVersionKind, schema.GroupVersionKind, error) {
	var out [2]schema.GroupVersionKind
	for i, o := range []client.Object{obj, holder} {
		gvk, err := apiutil.GVKForObject(o, c.Scheme())
		if err != nil {
			return out[0], out[1], fmt.Errorf("finding the kind of %s: %w", o.GetName(), err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvk)
		out[i] = gvk
	}
	return out[0], out[1], nil
}
