//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/podtoken"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

const (
	// widgetChart is the chart of examples/helm-teardown: the operator's
	// Deployment, ServiceAccount, ClusterRole/Binding, leader-election
	// Role/Binding, the Widget CRD, a Teardown and Widgets.
	widgetChart = "../../examples/helm-teardown/chart"
	// widgetCleanup is how long the operator's cleanup of a Widget takes:
	// longer than the minute kube-apiserver accepts a token whose
	// ServiceAccount or Pod is being deleted, with a margin.
	widgetCleanup = 95 * time.Second
	// lockout is what the test asserts the cleanup outlived.
	lockout   = 90 * time.Second
	finalizer = "widget-operator.example.com/cleanup"
)

var widgets = []string{"w1", "w2", "w3"}

// TestOperatorUninstall installs an operator's chart with the real helm,
// each of helmcli.Versions (the four releases at once), runs the operator
// as a process authenticating with a TokenRequest token of its
// ServiceAccount bound to a Pod of its Deployment (no impersonation), and
// uninstalls the release with `helm uninstall`, which deletes everything
// at once while the operator's cleanup of its Widgets takes 95 s.
//
// With the chart's Teardown, the operator finalizes every Widget with its
// own token, every request succeeding, the last ones after the 90 s mark,
// and afterwards nothing of the release is left. Without it (the same chart,
// --set teardown=false), the operator's token stops working with its
// RBAC and ServiceAccount (403, 401) and the Widgets keep their finalizer.
func TestOperatorUninstall(t *testing.T) {
	ctx, k := startTeardown(t)
	bin := buildWidgetOperator(t)
	for _, version := range helmcli.Versions {
		helm := ensureHelmVersion(t, version)
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			operatorUninstall(ctx, t, k, helm, bin)
		})
	}
}

func operatorUninstall(ctx context.Context, t *testing.T, k client.Client, helm, bin string) {
	t.Run("with the Teardown", func(t *testing.T) {
		t.Parallel()
		r := installWidgets(ctx, t, k, helm, bin, true)
		started := time.Now()
		out, code := r.helm("uninstall", r.release, "--debug")
		t.Logf("helm uninstall: exit %d\n%s", code, out)
		// The kept objects' DELETEs are refused (Deny lien): helm reports
		// an error and stops before it purges the release record.
		refusal := "deletion of serviceaccounts " + r.ns + "/widget-operator is refused"
		if code != 1 || !strings.Contains(out, "Error: failed to delete release: "+r.release) || !strings.Contains(out, refusal) {
			t.Errorf("helm uninstall with the Teardown: exit %d, want 1, %q and (--debug) %q", code, "Error: failed to delete release: "+r.release, refusal)
		}

		r.op.poll(t, 5*time.Minute, "every Widget finalized", func(ctx context.Context) (bool, error) {
			l, err := r.widgets(ctx)
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				// The CRD, which helm deleted too, goes as soon as its last
				// Widget has: none is left.
				return true, nil
			}
			return err == nil && len(l) == 0, err
		})
		recs := r.op.records(t)
		finalized := map[string]time.Time{}
		for _, rec := range recs {
			if rec.Code == 401 || rec.Code == 403 {
				t.Errorf("the operator's request %s %s was refused (%d) at %s after the uninstall", rec.Method, rec.Path, rec.Code, rec.Time.Sub(started).Round(time.Second))
			}
			if rec.Finalized != "" {
				finalized[rec.Finalized] = rec.Time
			}
		}
		for _, w := range widgets {
			at, ok := finalized[r.ns+"/"+w]
			switch {
			case !ok:
				t.Errorf("widget %s: gone, but the operator's records do not say it finalized it", w)
			case at.Sub(started) < lockout:
				t.Errorf("widget %s finalized %s after the uninstall, want the cleanup to outlive %s", w, at.Sub(started).Round(time.Second), lockout)
			}
		}
		last := recs[len(recs)-1]
		t.Logf("the operator finalized %d Widgets with its own token; its last request %s %s: %d, %s after helm uninstall", len(finalized), last.Method, last.Path, last.Code, last.Time.Sub(started).Round(time.Second))

		r.waitNothingLeft(t, k)
		// helm stopped before its purge, leaving the release record
		// uninstalling; once the plan finished and everything of the
		// release is gone, the controller removes it, as a second helm
		// uninstall would: no second command.
		r.waitNoReleaseRecords(t, k)
		if out, code := r.helm("status", r.release); code == 0 || !strings.Contains(out, "release: not found") {
			t.Errorf("helm status after the plan: exit %d, want the release not found\n%s", code, out)
		}
	})

	t.Run("without the Teardown", func(t *testing.T) {
		t.Parallel()
		r := installWidgets(ctx, t, k, helm, bin, false)
		out, code := r.helm("uninstall", r.release)
		t.Logf("helm uninstall: exit %d\n%s", code, out)
		if code != 0 || !strings.Contains(out, `release "`+r.release+`" uninstalled`) {
			t.Errorf("helm uninstall without the Teardown: exit %d, want 0 and %q", code, `release "`+r.release+`" uninstalled`)
		}

		// The operator's rights and ServiceAccount are gone, for ever: its
		// cleanup is refused, 403 when its ClusterRole went first (its
		// retries then back off for minutes), 401 once its token no
		// longer authenticates; either way the Widgets cannot be
		// finalized.
		var refused record
		r.op.pollRecords(t, 2*time.Minute, "the operator's cleanup refused", func(recs []record) bool {
			for _, rec := range recs {
				if (rec.Code == 401 || rec.Code == 403) && strings.Contains(rec.Path, "/widgets/") {
					refused = rec
					return true
				}
			}
			return false
		})
		t.Logf("the operator's %s %s: %d", refused.Method, refused.Path, refused.Code)
		if gone, err := testenv.Gone(ctx, k, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "widget-operator"}}); err != nil || !gone {
			t.Errorf("serviceaccount widget-operator: gone %v (%v), want deleted by helm uninstall", gone, err)
		}
		l, err := r.widgets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var stuck []string
		for _, w := range l {
			if w.GetDeletionTimestamp() != nil && slices.Contains(w.GetFinalizers(), finalizer) {
				stuck = append(stuck, w.GetName())
			}
		}
		if diff := slices.Compare(stuck, widgets); diff != 0 {
			t.Errorf("Widgets stuck with the operator's finalizer: %v, want %v", stuck, widgets)
		}
		for _, rec := range r.op.records(t) {
			if rec.Finalized != "" {
				t.Errorf("the operator finalized %s, want every Widget stuck", rec.Finalized)
			}
		}
		// What a person ends up doing: remove the finalizers, skipping the
		// cleanup.
		for _, w := range l {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if err := k.Patch(ctx, &w, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(t, time.Minute, "the CRD gone once its Widgets are", func(ctx context.Context) (bool, error) {
			return testenv.Gone(ctx, k, r.crd())
		})
	})
}

// widgetRelease is one installed release of the widget chart, with its
// operator running.
type widgetRelease struct {
	ns, release, group string
	kubeconfig         string // helm's: the admin, as a user the lien policies do not trust
	helmBin            string
	helmHome           string
	teardown           bool
	op                 *widgetOperator
	k                  client.Client
}

// installWidgets installs the chart into a new namespace (its own Widget
// API group, so that both variants run at once), starts the operator with a
// token bound to a Pod of its Deployment, and creates the Widgets by a
// helm upgrade (the CRD is in the chart: a first install cannot map
// Widgets). It returns once the operator put its finalizer on every
// Widget.
func installWidgets(ctx context.Context, t *testing.T, k client.Client, helm, bin string, withTeardown bool) *widgetRelease {
	t.Helper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "uninstall-"}}
	if err := k.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), nsObj) })
	r := &widgetRelease{
		ns: nsObj.Name, release: "widgets", group: nsObj.Name + ".example.com",
		kubeconfig: writeKubeconfig(t), helmBin: helm, helmHome: t.TempDir(), teardown: withTeardown, k: k,
	}
	if out, code := r.helm("install", r.release, widgetChart, "--set", "apiGroup="+r.group, "--set", fmt.Sprintf("teardown=%t", withTeardown)); code != 0 {
		t.Fatalf("helm install: exit %d\n%s", code, out)
	}
	testenv.Eventually(t, 30*time.Second, "the Widget CRD served", func(ctx context.Context) (bool, error) {
		_, err := r.widgets(ctx)
		return err == nil, nil
	})
	if withTeardown {
		testenv.Eventually(t, 30*time.Second, "the Teardown armed", func(ctx context.Context) (bool, error) {
			td := &v1alpha1.Teardown{}
			if err := k.Get(ctx, client.ObjectKey{Name: r.teardownName()}, td); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return meta.IsStatusConditionTrue(td.Status.Conditions, v1alpha1.ConditionArmed), nil
		})
	}

	id, err := podtoken.New(ctx, cfg, r.ns, "widget-operator")
	if err != nil {
		t.Fatal(err)
	}
	r.op = startWidgetOperator(t, bin, id, r.group)
	r.op.pollRecords(t, 30*time.Second, "the operator's SelfSubjectReview", func(recs []record) bool {
		return slices.ContainsFunc(recs, func(rec record) bool { return rec.User != "" })
	})
	for _, rec := range r.op.records(t) {
		if rec.User == "" {
			continue
		}
		if rec.User != id.Username || !slices.Equal(rec.Extra["authentication.kubernetes.io/pod-name"], []string{id.Pod.Name}) {
			t.Fatalf("the operator is %s (extra %v), want %s with a token bound to pod %s", rec.User, rec.Extra, id.Username, id.Pod.Name)
		}
	}

	if out, code := r.helm("upgrade", r.release, widgetChart, "--reuse-values", "--set", "widgets={"+strings.Join(widgets, ",")+"}"); code != 0 {
		t.Fatalf("helm upgrade: exit %d\n%s", code, out)
	}
	r.op.poll(t, time.Minute, "the operator's finalizer on every Widget", func(ctx context.Context) (bool, error) {
		l, err := r.widgets(ctx)
		if err != nil || len(l) != len(widgets) {
			return false, err
		}
		for _, w := range l {
			if !slices.Contains(w.GetFinalizers(), finalizer) {
				return false, nil
			}
		}
		return true, nil
	})
	return r
}

// helm runs helm in the release's namespace and returns its combined
// output and exit code.
func (r *widgetRelease) helm(args ...string) (string, int) {
	args = append([]string{"--kubeconfig", r.kubeconfig, "--kube-as-user", "helm-user", "--kube-as-group", "system:masters", "-n", r.ns}, args...)
	cmd := exec.Command(r.helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(r.helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(r.helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(r.helmHome, "data"))
	out, err := cmd.CombinedOutput()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		return fmt.Sprintf("running helm: %v\n%s", err, out), -1
	}
	return string(out), 0
}

func (r *widgetRelease) teardownName() string { return r.ns + "-" + r.release }

// crd is the release's Widget CRD, metadata only (the client's scheme does
// not know apiextensions).
func (r *widgetRelease) crd() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets." + r.group}}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd
}

// widgets lists the release's Widgets, sorted by name.
func (r *widgetRelease) widgets(ctx context.Context) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(r.group + "/v1")
	l.SetKind("WidgetList")
	if err := r.k.List(ctx, l, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	slices.SortFunc(l.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return l.Items, nil
}

// waitNothingLeft waits until nothing of the release is left: the
// operator's Deployment, its ReplicaSet and Pod, ServiceAccount, RBAC, the
// Widgets and their CRD, the Teardown and its ClusterLien.
func (r *widgetRelease) waitNothingLeft(t *testing.T, k client.Client) {
	t.Helper()
	operator := r.ns + "-" + r.release + "-widget-operator"
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "widget-operator"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "widget-operator"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "widget-operator-leader-election"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "widget-operator-leader-election"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: operator}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: operator}},
		r.crd(),
	}
	if r.teardown {
		objs = append(objs,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: operator + "-teardown"}},
			&v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: r.teardownName()}},
			&v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: teardown.KeepName(r.teardownName())}})
	}
	for _, obj := range objs {
		kind := fmt.Sprintf("%T", obj)[1:]
		if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
			kind = "CustomResourceDefinition"
		}
		testenv.Eventually(t, time.Minute, kind+" "+obj.GetName()+" gone", func(ctx context.Context) (bool, error) {
			return testenv.Gone(ctx, k, obj)
		})
	}
	testenv.Eventually(t, time.Minute, "the operator's ReplicaSet and Pod gone", func(ctx context.Context) (bool, error) {
		var rs appsv1.ReplicaSetList
		var pods corev1.PodList
		for _, l := range []client.ObjectList{&rs, &pods} {
			if err := k.List(ctx, l, client.InNamespace(r.ns), client.MatchingLabels{"app.kubernetes.io/instance": r.release}); err != nil {
				return false, err
			}
		}
		return len(rs.Items)+len(pods.Items) == 0, nil
	})
}

// waitNoReleaseRecords waits until helm's release records are gone.
func (r *widgetRelease) waitNoReleaseRecords(t *testing.T, k client.Client) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "helm's release records gone", func(ctx context.Context) (bool, error) {
		var records corev1.SecretList
		err := k.List(ctx, &records, client.InNamespace(r.ns), client.MatchingLabels{"owner": "helm", "name": r.release})
		return err == nil && len(records.Items) == 0, err
	})
}

// buildWidgetOperator builds examples/helm-teardown and returns the
// binary's path.
func buildWidgetOperator(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "widget-operator")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/teardown-dev/teardown/examples/helm-teardown")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/helm-teardown: %v\n%s", err, out)
	}
	return bin
}

// record is one line of the operator's records (examples/helm-teardown).
type record struct {
	Time      time.Time           `json:"time"`
	Method    string              `json:"method"`
	Path      string              `json:"path"`
	Code      int                 `json:"code"`
	User      string              `json:"user"`
	Extra     map[string][]string `json:"extra"`
	Finalized string              `json:"finalized"`
}

// widgetOperator is the operator process.
type widgetOperator struct {
	logPath, recordsPath string
	exited               chan struct{}
	waitErr              error // set before exited closes
}

// startWidgetOperator runs bin with a kubeconfig holding only id's token,
// and stops it at the end of the test, logging its output if the test
// failed.
func startWidgetOperator(t *testing.T, bin string, id *podtoken.Identity, group string) *widgetOperator {
	t.Helper()
	dir := t.TempDir()
	kubeconfig, err := id.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	op := &widgetOperator{logPath: filepath.Join(dir, "operator.log"), recordsPath: filepath.Join(dir, "records.jsonl"), exited: make(chan struct{})}
	logFile, err := os.Create(op.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "--group", group,
		"--cleanup", widgetCleanup.String(), "--step", "15s", "--records", op.recordsPath)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+id.Pod.Namespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	go func() {
		op.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(op.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-op.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-op.exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(op.logPath)
			t.Logf("the operator's log:\n%s", log)
		}
	})
	return op
}

// records reads what the operator recorded so far.
func (op *widgetOperator) records(t *testing.T) []record {
	t.Helper()
	data, err := os.ReadFile(op.recordsPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			continue // a line being written
		}
		recs = append(recs, rec)
	}
	return recs
}

// poll waits up to timeout for cond, failing the test at once if the
// operator exits meanwhile.
func (op *widgetOperator) poll(t *testing.T, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-op.exited:
			return false, fmt.Errorf("the operator exited: %w", op.waitErr)
		default:
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// pollRecords waits up to timeout until the operator's records satisfy
// cond (the operator may have exited).
func (op *widgetOperator) pollRecords(t *testing.T, timeout time.Duration, what string, cond func([]record) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(op.records(t)), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
