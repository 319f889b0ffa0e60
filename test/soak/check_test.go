package soak

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rec records a version of kind/ns/name (uid) at rv.
func rec(h *History, kind, ns, name string, uid types.UID, rv string, labels map[string]string, deleting, deleted bool) {
	m := &metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, ResourceVersion: rv, Labels: labels}
	if deleting {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	}
	h.Record(kind, m, deleted)
}

func strs(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

func TestCheckHistoryLiens(t *testing.T) {
	marked := map[string]string{"teardown.dev/lien": "true"}
	for _, tc := range []struct {
		name   string
		events func(h *History)
		fact   LienFact
		want   []string
	}{{
		name: "deleted after the holder went",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "p", "p", "10", nil, false, false)
			rec(h, "ConfigMap", "a", "p", "p", "12", marked, false, false)
			rec(h, "ConfigMap", "a", "h", "h", "11", nil, false, false)
			rec(h, "ConfigMap", "a", "h", "h", "20", nil, false, true)
			rec(h, "ConfigMap", "a", "p", "p", "21", nil, false, false)
			rec(h, "ConfigMap", "a", "p", "p", "25", nil, false, true)
		},
		fact: LienFact{Protected: "p", Holder: "h", Mode: "Deny"},
	}, {
		name: "deleted while held",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "p", "p", "12", marked, false, false)
			rec(h, "ConfigMap", "a", "h", "h", "11", nil, false, false)
			rec(h, "ConfigMap", "a", "p", "p", "15", marked, false, true)
		},
		fact: LienFact{Protected: "p", Holder: "h", Mode: "Deny"},
		want: []string{"premature-deletion: ConfigMap a/p was deleted (revision 15) while its Deny lien was held (released at never)"},
	}, {
		name: "deleted before the lien marked it: never protected",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "p", "p", "12", nil, false, false)
			rec(h, "ConfigMap", "a", "p", "p", "13", nil, false, true)
		},
		fact: LienFact{Protected: "p", Holder: "h", Mode: "Defer"},
	}, {
		name: "lien deleted by the test releases",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "p", "p", "12", marked, false, false)
			rec(h, "Lien", "a", "l", "l", "13", nil, true, false)
			rec(h, "ConfigMap", "a", "p", "p", "15", nil, false, true)
		},
		fact: LienFact{Lien: "l", Protected: "p", Holder: "h", Mode: "Deny", DeletedByTest: true},
	}, {
		name: "lien deleted by its namespace does not release",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "p", "p", "12", marked, false, false)
			rec(h, "Lien", "a", "l", "l", "13", nil, true, false)
			rec(h, "ConfigMap", "a", "p", "p", "15", nil, false, true)
		},
		fact: LienFact{Lien: "l", Protected: "p", Holder: "h", Mode: "Deny"},
		want: []string{"premature-deletion: ConfigMap a/p was deleted (revision 15) while its Deny lien was held (released at never)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			tc.events(h)
			if diff := cmp.Diff(tc.want, strs(CheckHistory(h, []LienFact{tc.fact}, nil))); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestCheckHistoryDependents(t *testing.T) {
	h := NewHistory()
	rec(h, "Namespace", "", "b", "nsb", "1", nil, false, false)
	rec(h, "ConfigMap", "a", "o", "o", "10", nil, false, false)
	rec(h, "ClusterRole", "", "early", "early", "11", nil, false, false)
	rec(h, "ClusterRole", "", "early", "early", "12", nil, false, true) // before the owner's deletion
	rec(h, "ClusterRole", "", "late", "late", "11", nil, false, false)
	rec(h, "ConfigMap", "a", "o", "o", "20", nil, true, false)
	rec(h, "ClusterRole", "", "late", "late", "21", nil, false, true)
	rec(h, "ConfigMap", "b", "inns", "inns", "11", nil, false, false)
	rec(h, "Namespace", "", "b", "nsb", "13", nil, true, false)
	rec(h, "ConfigMap", "b", "inns", "inns", "14", nil, false, true) // its namespace took it
	rec(h, "ClusterRole", "", "bytest", "bytest", "11", nil, false, false)
	rec(h, "ClusterRole", "", "bytest", "bytest", "12", nil, false, true)
	deps := []DependentFact{
		{Dependent: "early", Owners: []types.UID{"o"}},
		{Dependent: "late", Owners: []types.UID{"o"}},
		{Dependent: "inns", Owners: []types.UID{"o"}},
		{Dependent: "bytest", Owners: []types.UID{"o"}, DeletedByTest: true},
	}
	want := []string{"premature-deletion: ClusterRole early was deleted (revision 12) while its owner ConfigMap a/o was live (its deletion started at revision 20)"}
	if diff := cmp.Diff(want, strs(CheckHistory(h, nil, deps))); diff != "" {
		t.Error(diff)
	}
}

func TestCheckFinal(t *testing.T) {
	link := func(uid string) map[string]string {
		return map[string]string{"teardown.dev/owners": `[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"o","uid":"` + uid + `"}]`}
	}
	live := []Live{
		{Kind: "ConfigMap", Namespace: "a", Name: "o", UID: "o", Labels: map[string]string{"teardown.dev/deletion-policy": "Foreground"}, Finalizers: []string{"teardown.dev/dependents"}},
		{Kind: "ClusterRole", Name: "ok", UID: "ok", Annotations: link("o")},
		{Kind: "ClusterRole", Name: "orphan", UID: "orphan", Annotations: link("gone")},
		{Kind: "ClusterRole", Name: "unlinked", UID: "unlinked"},
		{Kind: "ClusterRole", Name: "kept", UID: "kept"},
		{Kind: "ConfigMap", Namespace: "c", Name: "blocked", UID: "blocked", Deleting: true, Finalizers: []string{BlockFinalizer}},
		{Kind: "Namespace", Name: "c", UID: "nsc", Deleting: true, Finalizers: []string{"kubernetes"}},
		{Kind: "Namespace", Name: "d", UID: "nsd", Deleting: true, Finalizers: []string{"kubernetes"}},
		{Kind: "ConfigMap", Namespace: "a", Name: "deferred", UID: "deferred", Finalizers: []string{"teardown.dev/lien"}},
		{Kind: "ConfigMap", Namespace: "a", Name: "nopolicy", UID: "nopolicy", Finalizers: []string{"teardown.dev/dependents"}},
		{Kind: "ConfigMap", Namespace: "a", Name: "linked", UID: "linked", Finalizers: []string{"teardown.dev/dependents"}},
		{Kind: "ClusterRole", Name: "linker", UID: "linker", Annotations: map[string]string{"teardown.dev/owners": `[{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"linked","uid":"linked"}]`}},
		{Kind: "Lien", Namespace: "a", Name: "l", UID: "l", Deleting: true, Finalizers: []string{"teardown.dev/lien-cleanup"}},
	}
	deps := []DependentFact{
		{Dependent: "unlinked", Owners: []types.UID{"gone"}},
		{Dependent: "kept", Owners: []types.UID{"gone"}, OrphanOwners: []types.UID{"gone"}},
		{Dependent: "ok", Owners: []types.UID{"o"}},
	}
	want := []string{
		`finalizer: ConfigMap a/deferred still carries teardown.dev/lien after every lien was deleted`,
		`finalizer: ConfigMap a/nopolicy still carries teardown.dev/dependents, which neither its policy ("") nor a linked dependent needs`,
		`finalizer: Lien a/l still carries teardown.dev/lien-cleanup after every lien was deleted`,
		`finalizer: Lien a/l still exists after it was deleted`,
		`hang: Lien a/l is still Terminating (finalizers [teardown.dev/lien-cleanup])`,
		`hang: Namespace d is still Terminating (finalizers [kubernetes])`,
		`orphan: ClusterRole orphan still links its gone owner ConfigMap/a/o`,
		`orphan: ClusterRole unlinked outlives all its owners`,
	}
	if diff := cmp.Diff(want, strs(CheckFinal(live, deps))); diff != "" {
		t.Error(diff)
	}
}

func TestCheckPlanHistory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events func(h *History)
		want   []string
	}{{
		name: "the plan ran on its trigger and kept the RBAC until done",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "trigger", "t", "10", nil, false, false)
			rec(h, "ConfigMap", "a", "data", "d", "11", nil, false, false)
			rec(h, "ClusterRole", "", "rbac", "k", "12", nil, false, false)
			rec(h, "ConfigMap", "a", "trigger", "t", "20", nil, true, false)
			rec(h, "ClusterRole", "", "rbac", "k", "21", nil, true, false)
			rec(h, "ConfigMap", "a", "data", "d", "22", nil, false, true)
			rec(h, "ClusterRole", "", "rbac", "k", "25", nil, false, true)
			rec(h, "ConfigMap", "a", "trigger", "t", "26", nil, false, true)
		},
	}, {
		name: "a step object deleted before the trigger",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "trigger", "t", "10", nil, false, false)
			rec(h, "ConfigMap", "a", "data", "d", "11", nil, false, false)
			rec(h, "ConfigMap", "a", "data", "d", "15", nil, false, true)
			rec(h, "ConfigMap", "a", "trigger", "t", "20", nil, true, false)
		},
		want: []string{"premature-deletion: ConfigMap a/data was deleted (revision 15) before plan p was triggered (revision 20)"},
	}, {
		name: "the kept RBAC gone before the step's object",
		events: func(h *History) {
			rec(h, "ConfigMap", "a", "trigger", "t", "10", nil, false, false)
			rec(h, "ConfigMap", "a", "data", "d", "11", nil, false, false)
			rec(h, "ClusterRole", "", "rbac", "k", "12", nil, false, false)
			rec(h, "ConfigMap", "a", "trigger", "t", "20", nil, true, false)
			rec(h, "ClusterRole", "", "rbac", "k", "21", nil, false, true)
			rec(h, "ConfigMap", "a", "data", "d", "22", nil, false, true)
		},
		want: []string{"premature-deletion: ClusterRole rbac kept until plan p was done is gone (revision 21) before ConfigMap a/data (revision 22), which the plan deletes"},
	}, {
		name: "its namespace took the step's object first",
		events: func(h *History) {
			rec(h, "Namespace", "", "a", "ns", "5", nil, false, false)
			rec(h, "ConfigMap", "a", "trigger", "t", "10", nil, false, false)
			rec(h, "ConfigMap", "a", "data", "d", "11", nil, false, false)
			rec(h, "Namespace", "", "a", "ns", "14", nil, true, false)
			rec(h, "ConfigMap", "a", "data", "d", "15", nil, false, true)
			rec(h, "ConfigMap", "a", "trigger", "t", "16", nil, true, false)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			tc.events(h)
			got := strs(CheckPlanHistory(h, []PlanFact{{Name: "p", Trigger: "t", Steps: []types.UID{"d"}, Kept: "k", Triggered: true}}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckPlans(t *testing.T) {
	got := strs(CheckPlans([]PlanState{
		{Name: "done", Phase: "Succeeded"},
		{Name: "stuck", Phase: "Running", TriggerLive: true},
		{Name: "leaky", Phase: "Succeeded", KeepLienLive: true},
		{Name: "never-armed", Phase: "Pending", Unarmed: true, ArmedReason: "TriggerMissing"},
		{Name: "silent", Phase: "Pending", Unarmed: true, ArmedReason: "AdmissionDenied"},
		{Name: "just-in-time", Phase: "Succeeded", Unarmed: true},
	}))
	want := []string{
		"finalizer: the keepUntilDone ClusterLien of plan leaky still exists",
		"hang: plan silent, whose trigger went with its namespace before the plan was seen armed, is \"Pending\" with Armed reason \"AdmissionDenied\": neither Succeeded (armed just in time) nor Pending with TriggerMissing",
		"hang: plan stuck is \"Running\" after its trigger was deleted",
		"hang: the trigger of plan stuck still exists",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
