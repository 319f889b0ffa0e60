//go:build integration

package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// helmChart renders a ConfigMap in the release's namespace and a
// cluster-scoped ClusterRole per release; --set extra=true adds a second
// ClusterRole, so that an upgrade changes what an uninstall must remove.
var helmChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: foo\nversion: 0.1.0\n",
	"templates/objects.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-settings}
data: {revision: "{{ .Release.Revision }}"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: {{ .Release.Namespace }}-{{ .Release.Name }}-foo}
rules: []
{{- if .Values.extra }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: {{ .Release.Namespace }}-{{ .Release.Name }}-extra}
rules: []
{{- end }}
`,
}

// TestHelmReleaseUnderLien runs the real helm, each of helmcli.Versions,
// through install, upgrade, rollback, upgrade and uninstall of a release
// whose records lien.ProtectHelmRelease protects, as a user the lien
// policies do not trust: every helm command succeeds as without teardown,
// one revision at a time is deployed, a new revision never inherits a
// marker without the lien behind it (the controller marks it itself), the
// uninstall removes what the last revision installed, and the records,
// their purge accepted, stay until the holder is gone.
func TestHelmReleaseUnderLien(t *testing.T) {
	ctx, k := startTeardown(t)
	for _, version := range helmcli.Versions {
		t.Run(version, func(t *testing.T) { helmReleaseUnderLien(ctx, t, k, version) })
	}
}

// helmUser is helm run against the control plane in a namespace of its
// own, as a user the lien policies do not trust (as an operator's service
// account would be), with a chart written from helmChart.
type helmUser struct {
	t          *testing.T
	helm       string
	kubeconfig string
	home       string
	ns         string
	chart      string
}

func newHelmUser(ctx context.Context, t *testing.T, k client.Client, version string) *helmUser {
	t.Helper()
	h := &helmUser{t: t, helm: ensureHelmVersion(t, version), kubeconfig: writeKubeconfig(t), home: t.TempDir(), chart: t.TempDir()}
	for name, data := range helmChart {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(h.chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.chart, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-"}}
	if err := k.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	h.ns = nsObj.Name
	return h
}

// try runs `helm ARGS -n NS` and returns what it printed and how it ended.
func (h *helmUser) try(args ...string) (string, error) {
	h.t.Helper()
	full := append([]string{"--kubeconfig", h.kubeconfig, "--kube-as-user", "helm-operator", "--kube-as-group", "system:masters", "-n", h.ns}, args...)
	cmd := exec.Command(h.helm, full...)
	cmd.Env = helmcli.Env(h.home)
	out, err := cmd.CombinedOutput()
	h.t.Logf("$ helm %s -n %s\n%s", strings.Join(args, " "), h.ns, out)
	return string(out), err
}

// run is try that fails the test if helm fails.
func (h *helmUser) run(args ...string) string {
	h.t.Helper()
	out, err := h.try(args...)
	if err != nil {
		h.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// records lists the release's records: Secrets, Helm's default driver.
func (h *helmUser) records(ctx context.Context, k client.Client, release string) ([]corev1.Secret, error) {
	var l corev1.SecretList
	err := k.List(ctx, &l, client.InNamespace(h.ns), client.MatchingLabels{"owner": "helm", "name": release})
	slices.SortFunc(l.Items, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	return l.Items, err
}

func helmReleaseUnderLien(ctx context.Context, t *testing.T, k client.Client, version string) {
	eventually := testenv.Eventually
	gone := func(ctx context.Context, obj client.Object) (bool, error) { return testenv.Gone(ctx, k, obj) }
	h := newHelmUser(ctx, t, k, version)
	ns, chart, run := h.ns, h.chart, h.run
	records := func(ctx context.Context) ([]corev1.Secret, error) { return h.records(ctx, k, "myfoo") }
	// allMarked: every record carries the Defer lien, and one is deployed.
	allMarked := func(revisions int) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			rs, err := records(ctx)
			if err != nil || len(rs) != revisions {
				return false, err
			}
			deployed := 0
			for _, r := range rs {
				if r.Labels[lien.Label] != lien.LabelDefer || !slices.Contains(r.Finalizers, lien.Finalizer) {
					return false, nil
				}
				if r.Labels["status"] == "deployed" {
					deployed++
				}
			}
			return deployed == 1, nil
		}
	}

	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "myfoo-owner"}}
	if err := k.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	run("install", "myfoo", chart)
	if _, err := lien.ProtectHelmRelease(ctx, k, ns, "myfoo", holder, "the operator uninstalls myfoo from its release records"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "revision 1 protected", allMarked(1))

	run("upgrade", "myfoo", chart, "--set", "extra=true")
	eventually(t, 30*time.Second, "revisions 1-2 protected, one deployed", allMarked(2))
	run("rollback", "myfoo", "1")
	eventually(t, 30*time.Second, "revisions 1-3 protected, one deployed", allMarked(3))
	run("upgrade", "myfoo", chart, "--set", "extra=true")
	eventually(t, 30*time.Second, "revisions 1-4 protected, one deployed", allMarked(4))
	if out := run("history", "myfoo"); strings.Count(out, "deployed") != 1 {
		t.Errorf("helm history shows more or less than one deployed revision:\n%s", out)
	}

	out := run("uninstall", "myfoo")
	if strings.Contains(strings.ToLower(out), "error") {
		t.Errorf("helm uninstall reported an error:\n%s", out)
	}
	for _, name := range []string{ns + "-myfoo-foo", ns + "-myfoo-extra"} {
		eventually(t, 30*time.Second, "clusterrole "+name+" uninstalled", func(ctx context.Context) (bool, error) {
			return gone(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
	// The purge was accepted; the records stay while the holder exists.
	rs, err := records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("after helm uninstall, %d records remain, want the 4 kept by the lien", len(rs))
	}
	for _, r := range rs {
		if r.DeletionTimestamp == nil {
			t.Errorf("record %s: not being deleted, want helm's purge accepted", r.Name)
		}
	}
	if err := k.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the records gone once the holder is", func(ctx context.Context) (bool, error) {
		rs, err := records(ctx)
		return err == nil && len(rs) == 0, err
	})
}

// startTeardown installs teardown and runs its controllers in this process
// until every cleanup of t has run (a namespace with protected objects goes
// only while they run), and returns a client as the admin.
func startTeardown(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background()) // not t.Context(): it ends before the cleanups
	t.Cleanup(cancel)
	env, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.StartTeardown(ctx); err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, k
}

// ensureHelmVersion returns the real helm at version (helmcli.Versions),
// built once into the cache, progress on stderr.
func ensureHelmVersion(t *testing.T, version string) string {
	t.Helper()
	cache, err := localcluster.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := helmcli.EnsureVersion(t.Context(), cache, version, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return helm
}

// writeKubeconfig writes the admin configuration as a kubeconfig, for helm.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	return writeKubeconfigAs(t, rest.ImpersonationConfig{})
}

// writeKubeconfigAs writes the admin configuration, acting as as, as a
// kubeconfig: for a process that must be someone the lien policies do not
// trust (an operator's service account is not teardown's controller).
func writeKubeconfigAs(t *testing.T, as rest.ImpersonationConfig) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: as.UserName, ImpersonateGroups: as.Groups}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	kc.CurrentContext = "local"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHelmReinstallWhileRecordsAreKept: with each of helmcli.Versions,
// after `helm uninstall` of a release whose records a lien keeps, its
// holder still there, helm still finds the release: `helm status` shows
// it uninstalling, and `helm install` and `helm upgrade --install` of the
// name are refused. `teardown why helm/NAME` says which lien and holder
// keep the record, since when, and when the name is free. Once the holder
// is gone the records go, and `helm install` of the name succeeds.
func TestHelmReinstallWhileRecordsAreKept(t *testing.T) {
	ctx, k := startTeardown(t)
	for _, version := range helmcli.Versions {
		t.Run(version, func(t *testing.T) { helmReinstallWhileRecordsAreKept(ctx, t, k, version) })
	}
}

func helmReinstallWhileRecordsAreKept(ctx context.Context, t *testing.T, k client.Client, version string) {
	h := newHelmUser(ctx, t, k, version)
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "myfoo-owner"}}
	if err := k.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	h.run("install", "myfoo", h.chart)
	l, err := lien.ProtectHelmRelease(ctx, k, h.ns, "myfoo", holder, "the operator uninstalls myfoo from its release records")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the record protected", func(ctx context.Context) (bool, error) {
		rs, err := h.records(ctx, k, "myfoo")
		return err == nil && len(rs) == 1 && slices.Contains(rs[0].Finalizers, lien.Finalizer), err
	})
	h.run("uninstall", "myfoo")

	// What a user types next, and what helm answers while the record is kept.
	if out := h.run("status", "myfoo"); !strings.Contains(out, "STATUS: uninstalling") {
		t.Errorf("helm %s status after the uninstall: want STATUS: uninstalling\n%s", version, out)
	}
	inUse := map[string]string{ // Helm 4 reworded it
		helmcli.V4: "Error: INSTALLATION FAILED: release name check failed: cannot reuse a name that is still in use",
		helmcli.V3: "Error: INSTALLATION FAILED: cannot re-use a name that is still in use",
	}[version]
	for _, tt := range []struct {
		args    []string
		refusal string
	}{
		{[]string{"install", "myfoo", h.chart}, inUse},
		{[]string{"upgrade", "--install", "myfoo", h.chart}, `Error: UPGRADE FAILED: "myfoo" has no deployed releases`},
	} {
		command := strings.Join(tt.args[:len(tt.args)-1], " ")
		if out, err := h.try(tt.args...); err == nil || !strings.Contains(out, tt.refusal) {
			t.Errorf("helm %s %s while the record is kept: %v, want refused with %q\n%s", version, command, err, tt.refusal, out)
		}
	}
	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"teardown", "why", "helm/myfoo", "-n", h.ns, "--kubeconfig", h.kubeconfig}, &out, &errOut)
	t.Logf("$ teardown why helm/myfoo -n %s\n%s%s", h.ns, out.String(), errOut.String())
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"secret/sh.helm.release.v1.myfoo.v1 is being deleted since",
		"Helm release " + h.ns + "/myfoo: its record (revision 1, uninstalling) is being deleted since",
		"helm install myfoo and helm upgrade --install myfoo are refused until it is gone",
		"helm status myfoo -n " + h.ns + " shows STATUS: uninstalling",
		"the name is free again once ConfigMap/myfoo-owner is gone",
		"lien " + h.ns + "/" + l.GetName() + " defers the deletion",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("teardown why helm/myfoo lacks %q", want)
		}
	}
	if code != 1 {
		t.Errorf("teardown why helm/myfoo: exit %d, want 1 (the record is held)", code)
	}

	if err := k.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the records gone once the holder is", func(ctx context.Context) (bool, error) {
		rs, err := h.records(ctx, k, "myfoo")
		return err == nil && len(rs) == 0, err
	})
	h.run("install", "myfoo", h.chart)
	if out := h.run("status", "myfoo"); !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("helm %s status after the re-install: want STATUS: deployed\n%s", version, out)
	}
	h.run("uninstall", "myfoo")
}
