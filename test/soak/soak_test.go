//go:build integration

package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/teardown-dev/teardown/localcluster"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

const runLabel = "soak.teardown.dev/run"

var (
	gvrConfigMap   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrClusterRole = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	gvrNamespace   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrLien        = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "liens"}
	gvrTeardown    = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "teardowns"}
	gvrClusterLien = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "clusterliens"}
	recorded       = map[schema.GroupVersionResource]string{gvrConfigMap: "ConfigMap", gvrClusterRole: "ClusterRole", gvrNamespace: "Namespace", gvrLien: "Lien"}
)

// TestSoak runs SOAK_OPS random operations (default 40) with faults, for
// at most SOAK_TIME (default 60s), from SOAK_SEED (default 1; 0: from the
// clock; the seed is printed), then checks the invariants. The short default is
// part of `make test`; `make soak` runs the long one.
func TestSoak(t *testing.T) {
	// go test (make test) replays seed 1; SOAK_SEED=0 takes one from the clock.
	seed := uint64(1)
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
		seed = n
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	ops := kit.Env("SOAK_OPS", 40)
	limit := 60 * time.Second
	if v := os.Getenv("SOAK_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SOAK_TIME=%q: %v", v, err)
		}
		limit = d
	}
	faultRate := float64(kit.Env("SOAK_FAULT_PERCENT", 12)) / 100
	s := &soak{t: t, rng: rand.New(rand.NewPCG(seed, 0x7ea2d0)), run: strconv.FormatUint(seed, 10), hist: NewHistory()}
	s.tamperer = newTamperer(t)
	t.Logf("soak: seed %d, %d operations, at most %v, faults on %.0f%% of operations", seed, ops, limit, faultRate*100)
	ctx, stopRecorder := context.WithCancel(t.Context())
	defer stopRecorder()
	s.record(ctx)
	for range 3 {
		s.newNamespace()
	}
	for range 3 {
		s.createOwner()
	}

	started := time.Now()
	done := 0
	for ; done < ops && time.Since(started) < limit; done++ {
		s.op()
		if s.rng.Float64() < faultRate {
			s.fault()
		}
		time.Sleep(time.Duration(s.rng.IntN(80)) * time.Millisecond)
	}
	if !ctl.Running() {
		if err := ctl.Start(); err != nil {
			t.Fatal(err)
		}
	}

	// Release everything: delete every lien the soak made, and trigger
	// every plan not triggered yet.
	for _, l := range s.liens {
		if !l.deleted {
			s.deleteLien(l)
		}
	}
	for _, p := range s.plans {
		if !p.triggered && !p.unarmed {
			s.trigger(p, time.Minute)
		}
	}
	converge := 3 * time.Minute
	final := s.converge(converge)
	var violations []Violation
	violations = append(violations, final...)
	// Then take away the deliberate blockers: now nothing may stay.
	for _, b := range s.blocked {
		_, _ = kube.CoreV1().ConfigMaps(b.ns).Patch(t.Context(), b.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	s.blocked = nil
	violations = append(violations, s.converge(converge)...)
	time.Sleep(2 * time.Second) // the recorder catches up
	stopRecorder()
	s.recorderWG.Wait()
	violations = append(violations, CheckHistory(s.hist, s.lienFacts(), s.depFacts())...)
	violations = append(violations, CheckPlanHistory(s.hist, s.planFacts())...)
	violations = append(violations, s.tamperAccepted...)
	// The two convergence checks report a lasting violation twice: once is enough.
	sortViolations(violations)
	violations = slices.CompactFunc(violations, func(a, b Violation) bool { return a == b })
	if s.recorderErr != nil {
		t.Errorf("the recorder's watch failed, the history is incomplete: %v", s.recorderErr)
	}
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
	protectedGone, depsGone := 0, 0
	for _, l := range s.liens {
		if o := s.hist.Get(l.protected); o != nil {
			if _, ok := o.DeletedRV(); ok {
				protectedGone++
			}
		}
	}
	for _, d := range s.deps {
		if o := s.hist.Get(d.uid); o != nil && !d.deletedByTest {
			if _, ok := o.DeletedRV(); ok {
				depsGone++
			}
		}
	}
	summary := fmt.Sprintf("soak: seed=%d operations=%d faults=%d (controller SIGKILL %d, controller SIGTERM %d, kube-apiserver restarts %d, kube-controller-manager restarts %d) conflicting-writes=%d tamper-tries=%d failed-operations=%d liens=%d (protected objects deleted after release %d) dependents=%d (collected %d) plans=%d (succeeded %d, triggered mid-run %d, namespace deleted before seen armed %d) namespace-deletions=%d violations=%d elapsed=%s",
		seed, done, s.faults(), s.kills, s.stops, s.apiRestarts, s.kcmRestarts, s.conflicts, s.tampers, s.failed, len(s.liens), protectedGone, len(s.deps), depsGone, len(s.plans), s.plansSucceeded, s.plansTriggeredMidRun, s.plansUnarmed, s.nsDeletions, len(violations), time.Since(started).Round(time.Second))
	fmt.Println(summary)
	t.Log(summary)
	if len(violations) > 0 {
		t.Logf("reproduce with: make soak SEED=%d OPS=%d", seed, ops)
	}
}

type owner struct {
	ns, name string
	uid      types.UID
	policy   string
	deleted  bool
}

type dependent struct {
	kind, ns, name string
	uid            types.UID
	owners         []*owner
	deletedByTest  bool
}

type lienM struct {
	ns, name                  string
	uid, protected, holder    types.UID
	protectedName, holderName string
	mode                      string
	deleted, holderDeleted    bool
}

type blockedObj struct{ ns, name string }

// planM is a Teardown plan: deleting its trigger (a ConfigMap) runs one
// step that deletes the plan's data ConfigMaps, while keepUntilDone keeps
// a ClusterRole (the operator's RBAC) until the plan is done.
type planM struct {
	name, ns, trigger, kept string
	triggerUID, keptUID     types.UID
	data                    []types.UID
	triggered, nsDeleted    bool
	// unarmed: its trigger's namespace was deleted before the plan was
	// armed (kube-apiserver refusing the controller's writes, as after a
	// restart): nothing held the trigger, the plan never runs and must say
	// why (Armed=False, TriggerMissing).
	unarmed bool
}

type soak struct {
	t    *testing.T
	rng  *rand.Rand
	run  string
	hist *History
	seq  int

	namespaces []string // live
	owners     []*owner
	deps       []*dependent
	liens      []*lienM
	blocked    []blockedObj
	plans      []*planM

	plansSucceeded, plansTriggeredMidRun, plansUnarmed int

	kills, stops, apiRestarts, kcmRestarts, conflicts, failed, nsDeletions int

	// tamperer acts with the built-in edit role in every namespace;
	// tampers counts its tries, tamperAccepted the ones that went through.
	tamperer       kubernetes.Interface
	tampers        int
	tamperAccepted []Violation

	recorderWG  sync.WaitGroup
	recorderErr error
}

func (s *soak) faults() int { return s.kills + s.stops + s.apiRestarts + s.kcmRestarts }

func (s *soak) next(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d", prefix, s.seq)
}

func (s *soak) labels() map[string]string { return map[string]string{runLabel: s.run} }

func (s *soak) fail(what string, err error) {
	if err != nil {
		s.failed++
		s.t.Logf("%s: %v", what, err)
	}
}

// op runs one random operation.
func (s *soak) op() {
	type weighted struct {
		w int
		f func()
	}
	table := []weighted{
		{14, s.createOwner}, {24, s.createDependent}, {11, s.deleteOwner}, {10, s.createLien},
		{7, s.deleteProtected}, {6, s.deleteHolder}, {4, s.deleteRandomLien}, {3, s.deleteNamespace},
		{10, s.conflictingWrites}, {3, s.deleteDependent}, {2, s.blockedDeletion},
		{4, s.createPlan}, {3, s.triggerPlan}, {4, s.tamper},
	}
	total := 0
	for _, e := range table {
		total += e.w
	}
	n := s.rng.IntN(total)
	for _, e := range table {
		if n < e.w {
			e.f()
			return
		}
		n -= e.w
	}
}

// fault injects one fault.
func (s *soak) fault() {
	ctx := s.t.Context()
	switch n := s.rng.IntN(100); {
	case n < 55:
		s.kills++
		_ = ctl.Kill()
		time.Sleep(time.Duration(s.rng.IntN(1500)) * time.Millisecond)
		if err := ctl.Start(); err != nil {
			s.t.Fatal(err)
		}
	case n < 60:
		s.stops++
		_ = ctl.Stop()
		if err := ctl.Start(); err != nil {
			s.t.Fatal(err)
		}
	case n < 80:
		s.apiRestarts++
		if err := cluster.Restart(ctx, localcluster.APIServer, s.rng.IntN(2) == 0); err != nil {
			s.t.Fatal(err)
		}
	default:
		s.kcmRestarts++
		if err := cluster.Restart(ctx, localcluster.ControllerManager, s.rng.IntN(2) == 0); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *soak) pickNS() string {
	if len(s.namespaces) == 0 {
		s.newNamespace()
	}
	return s.namespaces[s.rng.IntN(len(s.namespaces))]
}

func (s *soak) newNamespace() {
	name := "soak-" + s.run + "-" + s.next("ns")
	_, err := kube.CoreV1().Namespaces().Create(s.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels()}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating namespace", err)
		return
	}
	s.namespaces = append(s.namespaces, name)
}

func (s *soak) liveOwners() []*owner {
	var out []*owner
	for _, o := range s.owners {
		if !o.deleted && slices.Contains(s.namespaces, o.ns) {
			out = append(out, o)
		}
	}
	return out
}

func (s *soak) createOwner() {
	policy := []string{"", "", "Foreground", "Orphan"}[s.rng.IntN(4)]
	ls := s.labels()
	if policy != "" {
		ls[links.PolicyLabel] = policy
	}
	ns := s.pickNS()
	cm, err := kube.CoreV1().ConfigMaps(ns).Create(s.t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.next("owner"), Labels: ls}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating owner", err)
		return
	}
	s.owners = append(s.owners, &owner{ns: ns, name: cm.Name, uid: cm.UID, policy: policy})
}

func (s *soak) createDependent() {
	live := s.liveOwners()
	if len(live) == 0 {
		s.createOwner()
		return
	}
	owners := []*owner{live[s.rng.IntN(len(live))]}
	if len(live) > 1 && s.rng.IntN(5) == 0 {
		if o := live[s.rng.IntN(len(live))]; o != owners[0] {
			owners = append(owners, o)
		}
	}
	meta := metav1.ObjectMeta{Name: s.next("dep"), Labels: s.labels()}
	for _, o := range owners {
		l := links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: o.ns, Name: o.name, UID: o.uid}
		if err := links.AddLink(&meta, l); err != nil {
			s.t.Fatal(err)
		}
	}
	d := &dependent{name: meta.Name, owners: owners}
	ctx := s.t.Context()
	if s.rng.IntN(2) == 0 {
		d.kind = "ClusterRole"
		meta.Name = "soak-" + s.run + "-" + meta.Name
		d.name = meta.Name
		cr, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta}, metav1.CreateOptions{})
		if err != nil {
			s.fail("creating dependent", err)
			return
		}
		d.uid = cr.UID
	} else {
		// In another namespace than the first owner's, when there is one.
		d.kind, d.ns = "ConfigMap", s.pickNS()
		for range 3 {
			if d.ns != owners[0].ns {
				break
			}
			d.ns = s.pickNS()
		}
		cm, err := kube.CoreV1().ConfigMaps(d.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
		if err != nil {
			s.fail("creating dependent", err)
			return
		}
		d.uid = cm.UID
	}
	s.deps = append(s.deps, d)
}

func (s *soak) deleteOwner() {
	live := s.liveOwners()
	if len(live) == 0 {
		return
	}
	o := live[s.rng.IntN(len(live))]
	err := kube.CoreV1().ConfigMaps(o.ns).Delete(s.t.Context(), o.name, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		o.deleted = true
		return
	}
	s.fail("deleting owner", err)
}

func (s *soak) deleteDependent() {
	if len(s.deps) == 0 {
		return
	}
	d := s.deps[s.rng.IntN(len(s.deps))]
	var err error
	if d.kind == "ClusterRole" {
		err = kube.RbacV1().ClusterRoles().Delete(s.t.Context(), d.name, metav1.DeleteOptions{})
	} else {
		err = kube.CoreV1().ConfigMaps(d.ns).Delete(s.t.Context(), d.name, metav1.DeleteOptions{})
	}
	if err == nil {
		d.deletedByTest = true
	}
}

func (s *soak) createLien() {
	ns := s.pickNS()
	ctx := s.t.Context()
	n := s.next("lien")
	prot, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prot-" + n, Labels: s.labels()}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating protected object", err)
		return
	}
	holder, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "holder-" + n, Labels: s.labels()}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating holder", err)
		return
	}
	mode := []string{"Deny", "Defer"}[s.rng.IntN(2)]
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Lien",
		"metadata": map[string]any{"name": n, "namespace": ns, "labels": map[string]any{runLabel: s.run}},
		"spec": map[string]any{
			"protect": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": prot.Name}},
			"heldBy":  []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": holder.Name}},
			"mode":    mode,
			"reason":  "soak " + s.run,
		},
	}}
	l, err := dyn.Resource(gvrLien).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating lien", err)
		return
	}
	s.liens = append(s.liens, &lienM{ns: ns, name: n, uid: l.GetUID(), protected: prot.UID, holder: holder.UID, protectedName: prot.Name, holderName: holder.Name, mode: mode})
}

func (s *soak) pickLien(pred func(*lienM) bool) *lienM {
	var cands []*lienM
	for _, l := range s.liens {
		if pred(l) && slices.Contains(s.namespaces, l.ns) {
			cands = append(cands, l)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rng.IntN(len(cands))]
}

// deleteProtected tries to delete a protected object: refused (Deny) or
// postponed (Defer) while the lien holds.
func (s *soak) deleteProtected() {
	l := s.pickLien(func(*lienM) bool { return true })
	if l == nil {
		return
	}
	_ = kube.CoreV1().ConfigMaps(l.ns).Delete(s.t.Context(), l.protectedName, metav1.DeleteOptions{})
}

func (s *soak) deleteHolder() {
	l := s.pickLien(func(l *lienM) bool { return !l.holderDeleted })
	if l == nil {
		return
	}
	if err := kube.CoreV1().ConfigMaps(l.ns).Delete(s.t.Context(), l.holderName, metav1.DeleteOptions{}); err == nil {
		l.holderDeleted = true
	}
}

func (s *soak) deleteRandomLien() {
	if l := s.pickLien(func(l *lienM) bool { return !l.deleted }); l != nil {
		s.deleteLien(l)
	}
}

func (s *soak) deleteLien(l *lienM) {
	err := dyn.Resource(gvrLien).Namespace(l.ns).Delete(s.t.Context(), l.name, metav1.DeleteOptions{})
	if err == nil {
		l.deleted = true
	} else if !apierrors.IsNotFound(err) {
		s.fail("deleting lien", err)
	}
}

func (s *soak) deleteNamespace() {
	if len(s.namespaces) < 2 {
		s.newNamespace()
		return
	}
	i := s.rng.IntN(len(s.namespaces))
	ns := s.namespaces[i]
	// Whether each plan of the namespace is armed is read before the
	// DELETE: one armed later never held its trigger.
	armed := map[*planM]bool{}
	for _, p := range s.plans {
		if p.ns == ns && !p.triggered && !p.nsDeleted {
			armed[p] = s.armed(s.t.Context(), p)
		}
	}
	if err := kube.CoreV1().Namespaces().Delete(s.t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		s.fail("deleting namespace", err)
		return
	}
	s.nsDeletions++
	s.namespaces = slices.Delete(s.namespaces, i, i+1)
	for _, o := range s.owners {
		if o.ns == ns {
			o.deleted = true
		}
	}
	for _, p := range s.plans {
		if p.ns == ns {
			p.nsDeleted = true // the namespace deletes the trigger: the plan runs
			if a, ok := armed[p]; ok && !a {
				p.unarmed = true
				s.plansUnarmed++
			}
		}
	}
	s.newNamespace()
}

// conflictingWrites changes a random object the controller works on a few
// times in a row, so that its optimistic writes meet conflicts.
func (s *soak) conflictingWrites() {
	var targets [][2]string // ns, name of ConfigMaps
	for _, o := range s.liveOwners() {
		targets = append(targets, [2]string{o.ns, o.name})
	}
	for _, l := range s.liens {
		targets = append(targets, [2]string{l.ns, l.protectedName})
	}
	for _, d := range s.deps {
		if d.kind == "ConfigMap" {
			targets = append(targets, [2]string{d.ns, d.name})
		}
	}
	if len(targets) == 0 {
		return
	}
	tg := targets[s.rng.IntN(len(targets))]
	for i := range 3 {
		s.conflicts++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"soak.teardown.dev/poke":"%d-%d"}}}`, s.seq, i)
		_, _ = kube.CoreV1().ConfigMaps(tg[0]).Patch(s.t.Context(), tg[1], types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
}

// newTamperer is a user with the built-in edit role in every namespace:
// it may write ConfigMaps but is not trusted with lien markers.
func newTamperer(t *testing.T) kubernetes.Interface {
	const user = "soak:tamperer"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "soak-tamperer-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return kubernetes.NewForConfigOrDie(as)
}

// tamper tries, as the tamperer, to take a lien's protection off its
// object (the label, the annotation, the Defer finalizer) at the
// resourceVersion it read the markers at, and to create an object with
// forged markers. The policies refuse each inside kube-apiserver, whatever
// fault is in progress; one that goes through is a violation.
func (s *soak) tamper() {
	l := s.pickLien(func(l *lienM) bool { return !l.deleted })
	if l == nil {
		return
	}
	ctx := s.t.Context()
	cm, err := kube.CoreV1().ConfigMaps(l.ns).Get(ctx, l.protectedName, metav1.GetOptions{})
	if err != nil {
		return
	}
	accepted := func(what string) {
		s.tamperAccepted = append(s.tamperAccepted, Violation{Invariant: "tamper", Message: fmt.Sprintf("%s of %s/%s (lien %s/%s) was accepted", what, l.ns, l.protectedName, l.ns, l.name)})
	}
	if cm.Labels["teardown.dev/lien"] != "" {
		rv := cm.ResourceVersion
		for _, try := range []struct{ what, patch string }{
			{"stripping the lien label", `{"metadata":{"resourceVersion":"` + rv + `","labels":{"teardown.dev/lien":null}}}`},
			{"dropping the lien annotation", `{"metadata":{"resourceVersion":"` + rv + `","annotations":{"teardown.dev/liens":null}}}`},
			{"dropping the finalizers", `{"metadata":{"resourceVersion":"` + rv + `","finalizers":null}}`},
		} {
			s.tampers++
			_, err := s.tamperer.CoreV1().ConfigMaps(l.ns).Patch(ctx, l.protectedName, types.MergePatchType, []byte(try.patch), metav1.PatchOptions{})
			if err == nil && (try.what != "dropping the finalizers" || slices.Contains(cm.Finalizers, "teardown.dev/lien")) {
				accepted(try.what)
			}
		}
	}
	s.tampers++
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.next("forged"), Labels: map[string]string{runLabel: s.run, "teardown.dev/lien": "true"},
		Annotations: map[string]string{"teardown.dev/liens": `[{"lien":"` + l.ns + `/never-existed","reason":"forged"}]`}}}
	if _, err := s.tamperer.CoreV1().ConfigMaps(l.ns).Create(ctx, forged, metav1.CreateOptions{}); err == nil {
		accepted("creating an object with forged lien markers beside it")
	}
}

// blockedDeletion deletes an object whose foreign finalizer nobody
// removes: it, and its namespace if deleted, stay Terminating on purpose.
func (s *soak) blockedDeletion() {
	ns := s.pickNS()
	name := s.next("blocked")
	ctx := s.t.Context()
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels(), Finalizers: []string{BlockFinalizer}}}, metav1.CreateOptions{}); err != nil {
		s.fail("creating blocked object", err)
		return
	}
	s.blocked = append(s.blocked, blockedObj{ns, name})
	s.fail("deleting blocked object", kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}))
}

func (s *soak) lienFacts() []LienFact {
	var out []LienFact
	for _, l := range s.liens {
		out = append(out, LienFact{Lien: l.uid, Protected: l.protected, Holder: l.holder, Mode: l.mode, DeletedByTest: l.deleted})
	}
	return out
}

func (s *soak) depFacts() []DependentFact {
	var out []DependentFact
	for _, d := range s.deps {
		f := DependentFact{Dependent: d.uid, DeletedByTest: d.deletedByTest}
		for _, o := range d.owners {
			f.Owners = append(f.Owners, o.uid)
			if o.policy == "Orphan" {
				f.OrphanOwners = append(f.OrphanOwners, o.uid)
			}
		}
		out = append(out, f)
	}
	return out
}

// live lists every object of the run that exists now.
func (s *soak) live(ctx context.Context) ([]Live, error) {
	var out []Live
	for gvr, kind := range recorded {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + s.run})
		if err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			out = append(out, Live{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), Deleting: o.GetDeletionTimestamp() != nil,
				Labels: o.GetLabels(), Annotations: o.GetAnnotations(), Finalizers: o.GetFinalizers()})
		}
	}
	return out, nil
}

// converge waits until the final invariants hold, and returns what still
// fails after timeout.
func (s *soak) converge(timeout time.Duration) []Violation {
	var last []Violation
	var lastErr error
	_ = wait.PollUntilContextTimeout(s.t.Context(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		live, err := s.live(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		lastErr = nil
		last = CheckFinal(live, s.depFacts())
		plans, err := s.planStates(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = append(last, CheckPlans(plans)...)
		return len(last) == 0, nil
	})
	if lastErr != nil {
		s.t.Errorf("listing the run's objects: %v", lastErr)
	}
	return last
}

// record watches every recorded kind from now on into s.hist; the watches
// resume from the last revision seen across restarts and timeouts.
func (s *soak) record(ctx context.Context) {
	sel := runLabel + "=" + s.run
	var ready sync.WaitGroup
	var mu sync.Mutex
	for gvr, kind := range recorded {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			s.t.Fatal(err)
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = sel
				return dyn.Resource(gvr).Watch(ctx, o)
			},
		})
		if err != nil {
			s.t.Fatal(err)
		}
		ready.Add(1)
		s.recorderWG.Add(1)
		go func() {
			defer s.recorderWG.Done()
			defer w.Stop()
			ready.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						if ctx.Err() == nil {
							mu.Lock()
							s.recorderErr = fmt.Errorf("%s watch closed", kind)
							mu.Unlock()
						}
						return
					}
					switch ev.Type {
					case watch.Added, watch.Modified, watch.Deleted:
						if o, ok := ev.Object.(*unstructured.Unstructured); ok {
							s.hist.Record(kind, o, ev.Type == watch.Deleted)
						}
					case watch.Error:
						mu.Lock()
						s.recorderErr = fmt.Errorf("%s watch: %s", kind, strings.TrimSpace(fmt.Sprint(ev.Object)))
						mu.Unlock()
					}
				}
			}
		}()
	}
	ready.Wait()
}

// createPlan creates an operator's objects and a Teardown for them: the
// trigger, 1-3 data ConfigMaps the plan's step deletes, and a ClusterRole
// kept until the plan is done.
func (s *soak) createPlan() {
	ctx := s.t.Context()
	ns := s.pickNS()
	n := s.next("plan")
	p := &planM{name: "soak-" + s.run + "-" + n, ns: ns, trigger: "trigger-" + n, kept: "soak-" + s.run + "-kept-" + n}
	trigger, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.trigger, Labels: s.labels()}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating a plan's trigger", err)
		return
	}
	p.triggerUID = trigger.UID
	dataLabels := s.labels()
	dataLabels["soak.teardown.dev/plan"] = n
	for i := range 1 + s.rng.IntN(3) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-%d", n, i), Labels: dataLabels}}, metav1.CreateOptions{})
		if err != nil {
			s.fail("creating a plan's data", err)
			return
		}
		p.data = append(p.data, cm.UID)
	}
	kept, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: p.kept, Labels: s.labels()}}, metav1.CreateOptions{})
	if err != nil {
		s.fail("creating a plan's kept ClusterRole", err)
		return
	}
	p.keptUID = kept.UID
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Teardown",
		"metadata": map[string]any{"name": p.name, "labels": map[string]any{runLabel: s.run}},
		"spec": map[string]any{
			"trigger":       map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": p.trigger},
			"keepUntilDone": []any{map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": p.kept}},
			"steps": []any{map[string]any{
				"name": "delete-data",
				"delete": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns,
					"selector": map[string]any{"matchLabels": map[string]any{"soak.teardown.dev/plan": n}}},
			}},
		},
	}}
	if _, err := dyn.Resource(gvrTeardown).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		s.fail("creating a plan", err)
		return
	}
	s.plans = append(s.plans, p)
}

// triggerPlan uninstalls an operator the way helm does: its trigger and
// its RBAC deleted at once, once its plan is armed.
func (s *soak) triggerPlan() {
	var cands []*planM
	for _, p := range s.plans {
		if !p.triggered && !p.nsDeleted {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return
	}
	if s.trigger(cands[s.rng.IntN(len(cands))], 0) {
		s.plansTriggeredMidRun++
	}
}

// trigger waits up to wait for p to be armed, then deletes its trigger
// and its kept ClusterRole. A plan whose namespace was deleted was
// triggered by the namespace: only its ClusterRole is deleted.
func (s *soak) trigger(p *planM, wait time.Duration) bool {
	ctx := s.t.Context()
	deadline := time.Now().Add(wait)
	for !s.armed(ctx, p) {
		if time.Now().After(deadline) {
			if wait > 0 {
				s.fail("triggering plan "+p.name, fmt.Errorf("not armed after %v", wait))
			}
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
	p.triggered = true
	if !p.nsDeleted {
		if err := kube.CoreV1().ConfigMaps(p.ns).Delete(ctx, p.trigger, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.fail("deleting a plan's trigger", err)
		}
	}
	// helm uninstall deletes the kept ClusterRole too: refused while the
	// plan is armed or runs (a Deny lien), the plan deletes it at its end.
	if err := kube.RbacV1().ClusterRoles().Delete(ctx, p.kept, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		s.fail("deleting a plan's kept ClusterRole", err)
	}
	return true
}

// armed reports whether p's Armed condition is True, or the plan already
// started (its namespace was deleted).
func (s *soak) armed(ctx context.Context, p *planM) bool {
	u, err := dyn.Resource(gvrTeardown).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == "Running" || phase == "Succeeded" {
		return true
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Armed" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (s *soak) planFacts() []PlanFact {
	var out []PlanFact
	for _, p := range s.plans {
		out = append(out, PlanFact{Name: p.name, Trigger: p.triggerUID, Steps: p.data, Kept: p.keptUID, Triggered: p.triggered})
	}
	return out
}

// planStates reads every plan, its trigger and its keepUntilDone lien.
func (s *soak) planStates(ctx context.Context) ([]PlanState, error) {
	s.plansSucceeded = 0
	var out []PlanState
	for _, p := range s.plans {
		u, err := dyn.Resource(gvrTeardown).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase == "Succeeded" {
			s.plansSucceeded++
		}
		st := PlanState{Name: p.name, Phase: phase, Unarmed: p.unarmed}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Armed" {
				st.ArmedReason, _ = m["reason"].(string)
			}
		}
		if cm, err := kube.CoreV1().ConfigMaps(p.ns).Get(ctx, p.trigger, metav1.GetOptions{}); err == nil && cm.UID == p.triggerUID {
			st.TriggerLive = true
		} else if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if _, err := dyn.Resource(gvrClusterLien).Get(ctx, "teardown-"+p.name, metav1.GetOptions{}); err == nil {
			st.KeepLienLive = true
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
