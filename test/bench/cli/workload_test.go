//go:build integration

package cli

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// The namespace `why` explains: an application's namespace as a cluster
// holds it, many objects of many kinds, a few of which hold its deletion.
const (
	benchNS      = "shop"
	release      = "shop"
	widgetFin    = "widgets.bench.teardown.dev/cleanup"
	configMapFin = "bench.teardown.dev/cleanup"
	lienName     = "keep-release"
	protected    = 10 // Secrets under the Deny lien
	appOwners    = 100
	claims       = 20
	helmObjects  = 10 // cluster-scoped objects Helm installed from benchNS
	orphanedHelm = 10 // cluster-scoped objects of a release whose namespace is gone
	workers      = 32 // concurrent creations
)

// share is one kind's part of the namespace's objects, in per mille.
type share struct {
	kind     string
	perMille int
	create   func(ctx context.Context, i int) error
}

// workload is what the namespace holds, besides appOwners ConfigMaps that
// other ConfigMaps name in an ownerReference, claims PVCs (kube-apiserver
// adds kubernetes.io/pvc-protection), a Helm release record and the lien's
// holder:
//   - ConfigMaps, one in 10 owned by an app ConfigMap, one in 100 with a
//     finalizer nothing removes (set by "cleanup-operator");
//   - Secrets, the first `protected` under the Deny lien keep-release;
//   - ServiceAccounts, headless Services without selector, Roles, RoleBindings;
//   - Widgets, an operator's CR, each with the operator's finalizer (the
//     operator does not run).
func workload(owners []metav1.OwnerReference) []share {
	return []share{
		{"ConfigMap", 400, func(ctx context.Context, i int) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%05d", i), Labels: map[string]string{"app": app(i)}}, Data: map[string]string{"config.yaml": "replicas: 3\nlog: info\n"}}
			if i%10 == 0 {
				cm.OwnerReferences = []metav1.OwnerReference{owners[i%len(owners)]}
			}
			manager := "shop-deployer"
			if i%100 == 7 {
				cm.Finalizers = []string{configMapFin}
				manager = "cleanup-operator"
			}
			_, err := kube.CoreV1().ConfigMaps(benchNS).Create(ctx, cm, metav1.CreateOptions{FieldManager: manager})
			return err
		}},
		{"Secret", 300, func(ctx context.Context, i int) error {
			_, err := kube.CoreV1().Secrets(benchNS).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secretName(i), Labels: map[string]string{"app": app(i)}},
				Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("s3cr3t")},
			}, metav1.CreateOptions{FieldManager: "shop-deployer"})
			return err
		}},
		{"ServiceAccount", 50, func(ctx context.Context, i int) error {
			_, err := kube.CoreV1().ServiceAccounts(benchNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%05d", i)}}, metav1.CreateOptions{})
			return err
		}},
		{"Service", 50, func(ctx context.Context, i int) error {
			_, err := kube.CoreV1().Services(benchNS).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%05d", i)},
				Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 8080}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"Role", 50, func(ctx context.Context, i int) error {
			_, err := kube.RbacV1().Roles(benchNS).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("reader-%05d", i)},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"RoleBinding", 50, func(ctx context.Context, i int) error {
			_, err := kube.RbacV1().RoleBindings(benchNS).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("reader-%05d", i)},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: fmt.Sprintf("reader-%05d", i)},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: fmt.Sprintf("worker-%05d", i), Namespace: benchNS}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"Widget", 100, func(ctx context.Context, i int) error {
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "bench.teardown.dev/v1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("widget-%05d", i), "finalizers": []any{widgetFin}},
				"spec":     map[string]any{"size": int64(i % 7)},
			}}
			_, err := dyn.Resource(kit.WidgetGVR).Namespace(benchNS).Create(ctx, w, metav1.CreateOptions{FieldManager: "widget-operator"})
			return err
		}},
	}
}

func app(i int) string        { return fmt.Sprintf("app-%03d", i%appOwners) }
func secretName(i int) string { return fmt.Sprintf("credentials-%05d", i) }

// populate creates the namespace with about total objects and returns how
// many it created in it, by kind.
func populate(tb testing.TB, ctx context.Context, total int) (map[string]int, error) {
	started := time.Now()
	if err := kit.InstallWidgets(ctx, cfg); err != nil {
		return nil, err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	created := map[string]int{}

	// The app ConfigMaps others are owned by, the lien's holder, the
	// release record, the claims.
	owners := make([]metav1.OwnerReference, appOwners)
	kit.Parallel(tb, workers, appOwners, func(i int) error {
		cm, err := kube.CoreV1().ConfigMaps(benchNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: app(i)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		owners[i] = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
		return nil
	})
	created["ConfigMap"] += appOwners
	if _, err := kube.CoreV1().ConfigMaps(benchNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "release-holder"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	created["ConfigMap"]++
	record := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + release + ".v1", Labels: map[string]string{"owner": "helm", "name": release, "status": "deployed", "version": "1"}},
		Type:       "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("H4sIAAAAAAAA")},
	}
	if _, err := kube.CoreV1().Secrets(benchNS).Create(ctx, record, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		return nil, err
	}
	created["Secret"]++
	kit.Parallel(tb, workers, claims, func(i int) error {
		_, err := kube.CoreV1().PersistentVolumeClaims(benchNS).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%02d", i)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: new(""),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	created["PersistentVolumeClaim"] += claims

	rest := total - appOwners - 2 - claims
	for _, s := range workload(owners) {
		n := rest * s.perMille / 1000
		kit.Parallel(tb, workers, n, func(i int) error { return s.create(ctx, i) })
		created[s.kind] += n
	}

	// Cluster-scoped objects Helm installed from the namespace (why's
	// HelmLeftovers), and some of a release whose namespace is gone
	// (orphans' finding).
	for i := range helmObjects + orphanedHelm {
		ns, rel := benchNS, release
		if i >= helmObjects {
			ns, rel = "gone", "old-shop"
		}
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s-%02d", ns, rel, i),
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": rel, "meta.helm.sh/release-namespace": ns},
		}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := lienOnSecrets(ctx); err != nil {
		return nil, err
	}
	n := 0
	for _, v := range created {
		n += v
	}
	fmt.Fprintf(os.Stderr, "cli: created %d objects in namespace %s in %s: %v\n", n, benchNS, time.Since(started).Round(time.Second), created)
	return created, nil
}

// lienOnSecrets puts the first protected Secrets under a Deny Lien held by
// release-holder, and runs teardown's controller (the built binary) until
// it marked them, then stops it: the benchmark measures the CLI alone.
func lienOnSecrets(ctx context.Context) error {
	var protect []any
	for i := range protected {
		protect = append(protect, map[string]any{"apiVersion": "v1", "kind": "Secret", "name": secretName(i)})
	}
	lien := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Lien",
		"metadata": map[string]any{"name": lienName, "namespace": benchNS},
		"spec": map[string]any{
			"protect": protect,
			"heldBy":  []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "release-holder"}},
			"mode":    "Deny",
			"reason":  "the credentials are needed to uninstall the release cleanly",
		},
	}}
	gvr := schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "liens"}
	if _, err := dyn.Resource(gvr).Namespace(benchNS).Create(ctx, lien, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the lien: %w", err)
	}
	ctl := &kit.Controller{Bin: teardown, Kubeconfig: kubeconfig, Log: workDir + "/controller.log"}
	if err := ctl.Start(); err != nil {
		return err
	}
	defer func() { _ = ctl.Stop() }()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Secrets(benchNS).List(ctx, metav1.ListOptions{LabelSelector: "teardown.dev/lien=true"})
		return err == nil && len(l.Items) == protected, nil
	})
	if err != nil {
		log, _ := os.ReadFile(ctl.Log)
		return fmt.Errorf("waiting for the controller to mark %d secrets: %w\n%s", protected, err, log)
	}
	return nil
}
