package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/helmoperator"
	"github.com/teardown-dev/teardown/internal/helmrelease"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// triesForTheRace bounds the tries without teardown. The namespace
// controller deletes a namespace's resource types in random order, and
// deletes the release record before the reconciler reads it in about 7
// tries in 10; 8 tries that all go the operator's way are about 1 in
// 15,000.
const triesForTheRace = 8

// triesWithTeardown is how often the protected namespace is deleted: the
// race, won every time.
const triesWithTeardown = 3

// operatorUser is who the Helm operator acts as: not the user teardown's
// controller runs as, so the lien policies trust it no more than they
// trust any operator's service account.
const operatorUser = "helm-operator"

// namespaceOrphansClusterScoped is problem 1 (seed 003): the real Helm
// operator of examples/helm-operator, on the upstream helm-operator-plugins
// reconciler, installs each Foo as a Helm release whose chart renders a
// cluster-scoped ClusterRole, which no owner reference can tie to the Foo.
// Deleting the Foo's namespace deletes the release record before the Foo's
// finalizer reads it, so the reconciler removes its finalizer and the
// ClusterRole is orphaned. Then the same with teardown: the release's
// records are kept, by a Defer lien held by the Foo, until the Foo is gone.
var namespaceOrphansClusterScoped = Scenario{
	Name:  "namespace-orphans-cluster-scoped",
	Title: "Deleting a namespace orphans the cluster-scoped objects its operator created",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		const ns, foo = "foohome", "myfoo"
		role := ns + "-" + foo + "-foo"
		op, err := e.startHelmOperator(ctx)
		if err != nil {
			return Outcome{}, err
		}
		defer op.stop()
		e.say("examples/helm-operator runs as a process, as user %s: the reconciler of helm-operator-plugins v0.8.0, unchanged\neach Foo is a Helm release whose chart renders configmap/<foo>-foo in the Foo's namespace and clusterrole/<namespace>-<foo>-foo", operatorUser)
		var out Outcome

		// Without teardown: the race, until the namespace controller wins it.
		orphanedOn := 0
		for try := 1; try <= triesForTheRace && orphanedOn == 0; try++ {
			r, err := op.try(ctx, ns, foo, role, nil)
			if err != nil {
				return Outcome{}, fmt.Errorf("try %d without teardown: %w", try, err)
			}
			if try == 1 {
				e.say("namespace %s holds foo/%s (finalizer %s) and its release record secret/%s\nthe release rendered clusterrole/%s: cluster-scoped, so no ownerReference can tie it to foo/%s\nthe namespace controller deletes resource types in random order: the race is repeated, up to %d tries, until it orphans", ns, foo, helmoperator.Finalizer, helmoperator.Record(foo, 1), role, foo, triesForTheRace)
			}
			switch r.ending {
			case helmoperator.ReleaseNotFound:
				orphanedOn = try
				out.LeftWithout = append(out.LeftWithout, "clusterrole/"+role)
				e.say("try %d: kubectl delete namespace %s: gone after %s; the release record went first\nhelm operator: %s\nclusterrole/%s is still there, and nothing will ever delete it: the record that listed it is gone", try, ns, r.took, r.line, role)
				if err := e.Kube.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{}); err != nil {
					return Outcome{}, fmt.Errorf("cleaning up the orphaned clusterrole/%s: %w", role, err)
				}
			case helmoperator.Uninstalled:
				e.say("try %d: kubectl delete namespace %s: gone after %s; the operator read the release record first and uninstalled clusterrole/%s\nhelm operator: %s", try, ns, r.took, role, r.line)
			case helmoperator.UninstalledUnderDelete:
				e.say("try %d: kubectl delete namespace %s: gone after %s; the operator uninstalled clusterrole/%s, the record went under Helm's purge\nhelm operator: %s", try, ns, r.took, role, r.line)
			}
		}
		without := fmt.Sprintf("ORPHANED %s (on try %d of at most %d: a race)", strings.Join(out.LeftWithout, ", "), orphanedOn, triesForTheRace)
		if orphanedOn == 0 {
			without = fmt.Sprintf("nothing orphaned in %d tries: the operator won the race every time", triesForTheRace)
		}

		// With teardown.
		if err := e.StartTeardown(ctx); err != nil {
			return Outcome{}, err
		}
		k, err := e.client()
		if err != nil {
			return Outcome{}, err
		}
		var protectedBy string
		protect := func(ctx context.Context, cr *unstructured.Unstructured) error {
			l, err := lien.ProtectHelmRelease(ctx, k, ns, foo, cr, "release records needed to uninstall "+foo)
			if err != nil {
				return fmt.Errorf("protecting release %s/%s: %w", ns, foo, err)
			}
			protectedBy = l.GetName()
			return op.Poll(ctx, time.Minute, "every record of release "+foo+" protected", func(ctx context.Context) (bool, error) {
				rs, err := e.Kube.CoreV1().Secrets(ns).List(ctx, helmrelease.ListOptions(foo))
				if err != nil || len(rs.Items) == 0 {
					return false, err
				}
				return !slices.ContainsFunc(rs.Items, func(s corev1.Secret) bool { return s.Labels[lien.Label] != lien.LabelDefer }), nil
			})
		}
		uninstalled := 0
		for try := 1; try <= triesWithTeardown && len(out.Left) == 0; try++ {
			from := op.LogSize()
			r, err := op.try(ctx, ns, foo, role, protect)
			if err != nil {
				return Outcome{}, fmt.Errorf("try %d with teardown: %w", try, err)
			}
			if try == 1 {
				e.say("teardown installed; for each Foo, lien.ProtectHelmRelease (what the operator would call) made lien %s/%s: it keeps every record of release %s while foo/%s exists\nDefer: the namespace controller's and Helm's DELETEs of the records are accepted, the records stay until foo/%s is gone", ns, protectedBy, foo, foo, foo)
			}
			if r.ending == helmoperator.ReleaseNotFound {
				out.Left = append(out.Left, "clusterrole/"+role)
				e.say("try %d: kubectl delete namespace %s: gone after %s; clusterrole/%s is ORPHANED under the lien\nhelm operator: %s", try, ns, r.took, role, r.line)
				if err := e.Kube.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{}); err != nil {
					return Outcome{}, fmt.Errorf("cleaning up the orphaned clusterrole/%s: %w", role, err)
				}
				break
			}
			uninstalled++
			detail := ""
			if l := op.Refused(from); l != "" {
				detail = "\nrefused by teardown: " + shorten(l, 220)
			}
			e.say("try %d: kubectl delete namespace %s: gone after %s; the operator uninstalled clusterrole/%s, then foo/%s went and the lien released the records\nhelm operator: %s%s", try, ns, r.took, role, foo, r.line, detail)
		}
		with := leftOrClean(out.Left)
		if len(out.Left) == 0 {
			with = fmt.Sprintf("nothing left behind (%d of %d tries)", uninstalled, triesWithTeardown)
		}
		out.Summary = "without teardown: " + without + "; with teardown: " + with
		return out, nil
	},
}

// helmOperatorRun is examples/helm-operator running for one scenario.
type helmOperatorRun struct {
	*helmoperator.Process
	e   *Env
	dir string
}

// startHelmOperator builds examples/helm-operator, found in the working
// directory or a parent (cached after the first time), installs its Foo CRD in place of the demo's schemaless one, and
// runs it as a process acting as operatorUser.
func (e *Env) startHelmOperator(ctx context.Context) (*helmOperatorRun, error) {
	src, err := helmoperator.FindSource()
	if err != nil {
		return nil, err
	}
	cache, err := localcluster.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	bin, err := helmoperator.Build(ctx, src, cache, e.Progress)
	if err != nil {
		return nil, err
	}
	crd, err := helmoperator.CRD(src)
	if err != nil {
		return nil, err
	}
	if err := e.replaceCRD(ctx, crd); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "teardown-demo-helm-operator-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	as := rest.ImpersonationConfig{UserName: operatorUser, Groups: []string{"system:masters"}}
	if err := helmoperator.WriteKubeconfig(e.Config, as, kubeconfig); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p, err := helmoperator.Start(bin, kubeconfig, filepath.Join(dir, "operator.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &helmOperatorRun{Process: p, e: e, dir: dir}, nil
}

// stop ends the operator and removes its kubeconfig and log.
func (op *helmOperatorRun) stop() {
	op.Stop()
	_ = os.RemoveAll(op.dir)
}

// raceResult is how one namespace deletion ended.
type raceResult struct {
	ending helmoperator.Ending
	line   string // the operator's log line that says so
	took   time.Duration
}

// try creates namespace ns and foo/foo in it, waits until the operator
// has installed the release, calls protect (when not nil) with the Foo,
// deletes the namespace as `kubectl delete namespace` does and waits until
// it is gone, and reads how the operator ended the release.
func (op *helmOperatorRun) try(ctx context.Context, ns, foo, role string, protect func(context.Context, *unstructured.Unstructured) error) (raceResult, error) {
	e := op.e
	from := op.LogSize()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return raceResult{}, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cr, err := e.Dynamic.Resource(fooGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Foo",
		"metadata": map[string]any{"name": foo},
		"spec":     map[string]any{"greeting": "hello"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return raceResult{}, fmt.Errorf("creating foo %s/%s: %w", ns, foo, err)
	}
	if err := op.WaitDeployed(ctx, e.Kube, ns, foo, 1, role); err != nil {
		return raceResult{}, err
	}
	if protect != nil {
		if err := protect(ctx, cr); err != nil {
			return raceResult{}, err
		}
	}
	took, err := e.deleteNamespace(ctx, ns, 3*time.Minute)
	if err != nil {
		return raceResult{}, err
	}
	// The Foo's finalizer held the namespace until the reconciler was done
	// with it, so what is left now stays left.
	_, err = e.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return raceResult{}, fmt.Errorf("reading clusterrole/%s: %w", role, err)
	}
	ending, line, err := op.EndingSince(from, err == nil)
	if err != nil {
		return raceResult{}, err
	}
	return raceResult{ending: ending, line: logMessage(line), took: took.Round(100 * time.Millisecond)}, nil
}

// logMessage is one of the operator's log lines (TIME LEVEL [LOGGER]
// MESSAGE [FIELDS], tab-separated) as a person reads it: the message, the
// error it carries, and the logger.
func logMessage(line string) string {
	f := strings.Split(line, "\t")
	var fields struct {
		Error string `json:"error"`
	}
	if last := f[len(f)-1]; strings.HasPrefix(last, "{") && json.Unmarshal([]byte(last), &fields) == nil {
		f = f[:len(f)-1]
	}
	if len(f) < 3 {
		return line
	}
	msg := f[len(f)-1]
	if fields.Error != "" {
		msg += ": " + fields.Error
	}
	if len(f) == 4 {
		msg += " (" + f[2] + ")"
	}
	return msg
}

// replaceCRD creates crd, or replaces the one of that name, and waits until
// it serves.
func (e *Env) replaceCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := e.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
		}
		crd.ResourceVersion = old.ResourceVersion
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("replacing CRD %s: %w", crd.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	return e.ensureCRD(ctx, crd, fooGVR)
}

// client is a controller-runtime client as the demo's user, for the
// library calls an operator makes.
func (e *Env) client() (client.Client, error) {
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	k, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting a client: %w", err)
	}
	return k, nil
}

func leftOrClean(left []string) string {
	if len(left) == 0 {
		return "nothing left behind"
	}
	return "LEFT " + strings.Join(left, ", ")
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
