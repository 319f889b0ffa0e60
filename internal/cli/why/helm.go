package why

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/helmrelease"
)

// helmKind is the pseudo-kind `why` takes for a Helm release: helm/NAME
// (no Kubernetes resource is called helm) names the newest record of
// release NAME in the namespace, the one `helm status` reads.
const helmKind = "helm"

var (
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

// helmReleaseArg returns the release args name, if they name one
// (helm/NAME or helm NAME).
func helmReleaseArg(args []string) (string, bool) {
	switch {
	case len(args) == 1 && strings.HasPrefix(args[0], helmKind+"/"):
		return strings.TrimPrefix(args[0], helmKind+"/"), true
	case len(args) == 2 && args[0] == helmKind:
		return args[1], true
	}
	return "", false
}

// getHelmRecord reads the newest record of Helm release name in ns: the
// Secret (Helm's default driver), else the ConfigMap (its configmap
// driver) of the highest version among those helmrelease.Selector selects.
func getHelmRecord(ctx context.Context, c *resource.Clients, ns, name string) (*cliresource.Info, error) {
	opts := helmrelease.ListOptions(name)
	secrets, err := c.Metadata.Resource(secretsGVR).Namespace(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing the records of Helm release %s in namespace %s: %w", name, ns, err)
	}
	kind, items := "secret", secrets.Items
	if len(items) == 0 {
		cms, err := c.Metadata.Resource(configMapsGVR).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the records of Helm release %s in namespace %s: %w", name, ns, err)
		}
		kind, items = "configmap", cms.Items
	}
	newest, revision := "", -1
	for _, r := range items {
		if v, err := strconv.Atoi(r.Labels["version"]); err == nil && v > revision {
			newest, revision = r.Name, v
		}
	}
	if newest == "" {
		return nil, fmt.Errorf("helm/%s: no record of that release in namespace %s (no Secret or ConfigMap labelled %s): nothing keeps the name", name, ns, helmrelease.Selector(name))
	}
	return resource.Get(c, ns, kind+"/"+newest)
}

// helmFinding: the target is a Helm release record being deleted. While
// it exists, Helm finds the release: `helm status` shows the revision's
// status (uninstalling once `helm uninstall` purged it), and `helm
// install` or `helm upgrade --install` of the name are refused. It says
// what keeps the record, since when, and when the name is free again.
func helmFinding(f *Facts, deleting bool) []Finding {
	obj := f.Object
	record := f.targetIs("", "Secret") || f.targetIs("", "ConfigMap")
	if !deleting || !record || obj.GetLabels()["owner"] != "helm" {
		return nil
	}
	release, status, revision := obj.GetLabels()["name"], obj.GetLabels()["status"], obj.GetLabels()["version"]
	ns := obj.GetNamespace()
	since := obj.GetDeletionTimestamp().Time
	fd := Finding{Kind: "HelmRelease",
		Title: fmt.Sprintf("Helm release %s/%s: its record (revision %s, %s) is being deleted since %s (%s ago) and still there: helm install %s and helm upgrade --install %s are refused until it is gone",
			ns, release, revision, orNone(status), since.UTC().Format(time.RFC3339), f.Now.Sub(since).Round(time.Second), release, release),
		Facts: []Fact{{"helm", fmt.Sprintf("helm status %s -n %s shows STATUS: %s; helm install says the name is still in use", release, ns, orNone(status))}},
	}
	var holders []string
	for _, l := range doctor.LiensOf(obj.GetLabels(), obj.GetAnnotations(), obj.GetFinalizers()) {
		if lo, ok := f.LienObjects[l.Name]; ok && len(lo.HeldBy) > 0 {
			holders = append(holders, lo.HeldBy...)
		}
		fd.Facts = append(fd.Facts, Fact{"kept by", "lien " + l.Name})
	}
	if status == "uninstalling" {
		fd.Facts = append(fd.Facts, Fact{"release", "helm uninstall ran to its end: what the release installed was deleted, its records are kept for whoever still reads them"})
	}
	switch {
	case len(holders) > 0:
		fd.Advice = append(fd.Advice, fmt.Sprintf("the name is free again once %s is gone (the lien is then released and the records go); install under another name meanwhile, or delete the holder if nothing needs the release any more", strings.Join(holders, ", ")))
	default:
		fd.Advice = append(fd.Advice, "the name is free again once the record is gone: the findings below say what keeps it")
	}
	return []Finding{fd}
}
