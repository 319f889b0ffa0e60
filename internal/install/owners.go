package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

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

// releaseOwners takes teardown's finalizer teardown.dev/dependents, and the
// label teardown.dev/owner, off every owner that holds it. Uninstall runs
// it once the controller is gone: nothing else would remove the finalizer,
// and the owner could never be deleted. Owners are found by label:
// teardown.dev/owner, and teardown.dev/deletion-policy for owners held
// before that label existed. Each PATCH carries the resourceVersion read.
func releaseOwners(ctx context.Context, cfg *rest.Config, dryRun bool, out io.Writer) error {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{} // listing every kind lists deprecated ones too
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lists, err := discovery.ServerPreferredResources(dc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering kinds for owners held by teardown: %w", err)
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "patch"}}, lists)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			gvr := gv.WithResource(r.Name)
			for _, selector := range []string{dependents.OwnerLabel, dependents.PolicyLabel} {
				items, err := md.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
				if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
					continue
				}
				if err != nil {
					return fmt.Errorf("listing %s held by teardown: %w", gvr.Resource, err)
				}
				for i := range items.Items {
					if err := releaseOwner(ctx, md.Resource(gvr).Namespace(items.Items[i].Namespace), &items.Items[i], dryRun); err != nil {
						return fmt.Errorf("releasing %s %s: %w", gvr.Resource, klog.KObj(&items.Items[i]), err)
					}
					if slices.Contains(items.Items[i].Finalizers, dependents.Finalizer) {
						verb := "released"
						if dryRun {
							verb = "would release"
						}
						fmt.Fprintf(out, "%s %s %s (finalizer %s)\n", verb, gvr.Resource, klog.KObj(&items.Items[i]), dependents.Finalizer)
					}
				}
			}
		}
	}
	return nil
}

// releaseOwner removes the finalizer and the owner label from o, if it has either.
func releaseOwner(ctx context.Context, ri metadata.ResourceInterface, o *metav1.PartialObjectMetadata, dryRun bool) error {
	_, labelled := o.Labels[dependents.OwnerLabel]
	if !labelled && !slices.Contains(o.Finalizers, dependents.Finalizer) {
		return nil
	}
	var fs any = slices.DeleteFunc(slices.Clone(o.Finalizers), func(f string) bool { return f == dependents.Finalizer })
	if len(fs.([]string)) == 0 {
		fs = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": o.ResourceVersion, "finalizers": fs, "labels": map[string]any{dependents.OwnerLabel: nil},
	}})
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, o.Name, types.MergePatchType, patch, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
