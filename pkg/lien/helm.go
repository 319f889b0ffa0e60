package lien

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// HelmRecords selects the release records of one Helm release: Helm's
// storage drivers label every revision's Secret (or ConfigMap, with the
// configmap driver) owner=helm and name=RELEASE.
func HelmRecords(release string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "helm", "name": release}}
}

// ProtectHelmRelease keeps every record of the Helm release
// namespace/release, of every revision, while holder exists: a Defer lien
// in the release's namespace (a ClusterLien when holder lives elsewhere)
// on the Secrets and ConfigMaps Helm's labels name. Defer, so that Helm's
// commands succeed as without teardown: its purge of the records at
// uninstall is accepted, and the records stay, kept by teardown's
// finalizer, until holder is gone; until then Helm still finds the
// release (helm status: uninstalling) and refuses to install another of
// the same name (teardown why helm/RELEASE says why). Helm's own writes to the records (a revision marked
// superseded, a new revision with the labels of the last) are made
// harmless in kube-apiserver by the teardown-lien-helm policy. Calling it
// again changes nothing; Release-like removal is deleting the lien, or
// holder going.
func ProtectHelmRelease(ctx context.Context, c client.Client, namespace, release string, holder client.Object, reason string) (client.Object, error) {
	if _, _, err := kinds(c, holder, holder); err != nil {
		return nil, err
	}
	hgvk := holder.GetObjectKind().GroupVersionKind()
	name := helmLienName(namespace, release, holder)
	if holder.GetNamespace() == namespace {
		want := HelmReleaseLien(release, holder, reason)
		l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		_, err := controllerutil.CreateOrUpdate(ctx, c, l, func() error {
			l.Spec = want.Spec
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("writing lien %s/%s: %w", namespace, name, err)
		}
		return l, nil
	}
	l := &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, l, func() error {
		l.Spec = v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{
				{APIVersion: "v1", Kind: "Secret", Namespace: namespace, Selector: HelmRecords(release)},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: namespace, Selector: HelmRecords(release)},
			},
			HeldBy: []v1alpha1.ClusterLienTarget{{APIVersion: hgvk.GroupVersion().String(), Kind: hgvk.Kind, Namespace: holder.GetNamespace(), Name: holder.GetName()}},
			Mode:   v1alpha1.LienModeDefer,
			Reason: reason,
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing cluster lien %s: %w", name, err)
	}
	return l, nil
}

// HelmReleaseLien is the Lien that protects the records of the Helm
// release named release in holder's namespace while holder exists: the one
// ProtectHelmRelease writes, and the one a ClusterLien with helmReleasesOf
// keeps for each object of its kind. holder's kind must be set.
func HelmReleaseLien(release string, holder client.Object, reason string) *v1alpha1.Lien {
	hgvk := holder.GetObjectKind().GroupVersionKind()
	return &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: holder.GetNamespace(), Name: helmLienName(holder.GetNamespace(), release, holder)},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{
				{APIVersion: "v1", Kind: "Secret", Selector: HelmRecords(release)},
				{APIVersion: "v1", Kind: "ConfigMap", Selector: HelmRecords(release)},
			},
			HeldBy: []v1alpha1.LienTarget{{APIVersion: hgvk.GroupVersion().String(), Kind: hgvk.Kind, Name: holder.GetName()}},
			Mode:   v1alpha1.LienModeDefer,
			Reason: reason,
		},
	}
}

// helmLienName is the name ProtectHelmRelease gives the lien: readable, at
// most 63 characters, unique for the release and holder.
func helmLienName(namespace, release string, holder client.Object) string {
	return lienName("keep-helm-", release, 45, "helm", namespace, release,
		holder.GetObjectKind().GroupVersionKind().GroupKind().String(), holder.GetNamespace(), holder.GetName())
}
