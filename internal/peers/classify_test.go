package peers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestClassify(t *testing.T) {
	longhorn := Case{Cause: [][]string{{"longhorn.io"}}, Keep: []string{"kubernetes"}}
	deadNode := Case{Cause: [][]string{{"worker-1"}}, DeadNode: true}
	argo := Case{Cause: [][]string{{"resources-finalizer.argocd.argoproj.io"}}, Keep: []string{"resources-finalizer.argocd.argoproj.io"}, Wrong: []string{`nobody will remove`}}
	tests := []struct {
		name  string
		c     Case
		clean func(Case, int, string) bool
		a     Answer
		want  Verdict
	}{{
		name: "a finalizer named, removal only of that one, tested",
		c:    longhorn,
		a: Answer{Exit: 1, Output: "[BLOCKING] finalizer longhorn.io: nobody will remove it\n" +
			`  - only if longhorn-manager is uninstalled for good: kubectl patch replica.longhorn.io r -n ns --type=json -p '[{"op":"test","path":"/metadata/finalizers/0","value":"longhorn.io"},{"op":"remove","path":"/metadata/finalizers/0"}]'` + "\n"},
		want: Verdict{Named: true},
	}, {
		name: "a name inside a longer one does not count",
		c:    longhorn,
		a:    Answer{Output: ".: Checking resources in namespace corpus-longhorn... found\n   > replica.longhorn.io/pvc-1-r-07001148... deletion skipped\n"},
		want: Verdict{Unnamed: []string{"longhorn.io"}},
	}, {
		name: "a name at the end of a sentence counts",
		c:    longhorn,
		a:    Answer{Output: "held by finalizer longhorn.io.\n"},
		want: Verdict{Named: true},
	}, {
		name: "forcing the namespace's finalize removes kubernetes",
		c:    longhorn,
		a:    Answer{Output: `curl -s -X PUT --data-binary @/tmp/ns.json http://localhost:8765/api/v1/namespaces/corpus-longhorn/finalize -H "Content-Type: application/json"` + "\n"},
		want: Verdict{Unnamed: []string{"longhorn.io"}, Unsafe: []string{"removes every finalizer, kubernetes included"}},
	}, {
		name: "a finalize that removes one named entry only",
		c:    Case{Cause: [][]string{{"foregroundDeletion"}}, Keep: []string{"kubernetes"}},
		a:    Answer{Output: `kubectl get namespace x -o json | jq '.spec.finalizers -= ["foregroundDeletion"]' | kubectl replace --raw /api/v1/namespaces/x/finalize -f -` + "\n"},
		want: Verdict{Named: true},
	}, {
		name: "removing every finalizer where one must stay",
		c:    argo,
		a: Answer{Output: "Stuck -> application/test-app (resources-finalizer.argocd.argoproj.io)\n" +
			`timeout 15 kubectl -n ns patch application/test-app --type json --patch='[ { "op": "remove", "path": "/metadata/finalizers" } ]'` + "\n"},
		want: Verdict{Named: true, Unsafe: []string{"removes every finalizer, resources-finalizer.argocd.argoproj.io included"}},
	}, {
		name: "a merge patch emptying finalizers where nothing must stay is not unsafe",
		c:    Case{Cause: [][]string{{"in-use.crossplane.io"}}},
		a:    Answer{Output: `kubectl patch providerconfig p -p '{"metadata":{"finalizers":null}}' --type=merge` + "\n"},
		want: Verdict{Unnamed: []string{"in-use.crossplane.io"}},
	}, {
		name: "a named removal of a finalizer that must stay",
		c:    argo,
		a:    Answer{Output: `kubectl patch application x --type=json -p '[{"op":"test","path":"/metadata/finalizers/0","value":"resources-finalizer.argocd.argoproj.io"},{"op":"remove","path":"/metadata/finalizers/0"}]'` + "\n"},
		want: Verdict{Named: true, Unsafe: []string{"removes finalizer resources-finalizer.argocd.argoproj.io"}},
	}, {
		name: "a wrong claim",
		c:    argo,
		a:    Answer{Output: "finalizer resources-finalizer.argocd.argoproj.io: Nobody will remove it\n"},
		want: Verdict{Named: true, Wrong: []string{`says "nobody will remove"`}},
	}, {
		name:  "claims nothing holds",
		c:     argo,
		clean: TeardownClean,
		a:     Answer{Exit: 0, Output: "nothing found that holds it\n"},
		want:  Verdict{Unnamed: []string{"resources-finalizer.argocd.argoproj.io"}, Wrong: []string{"says nothing holds"}},
	}, {
		name: "finalizer-doctor's apply clears what it diagnosed",
		c:    argo,
		a:    Answer{Output: "next: finalizer-doctor application/x -n ns --apply --confirm 3f2a\n"},
		want: Verdict{Unnamed: []string{"resources-finalizer.argocd.argoproj.io"}, Unsafe: []string{"removes every finalizer, resources-finalizer.argocd.argoproj.io included"}},
	}, {
		name: "a force delete on a dead node without confirming it",
		c:    deadNode,
		a:    Answer{Output: "Stuck -> pod/p on node worker-1\ntimeout 15 kubectl -n ns --grace-period=0 --force=true delete pod/p\n"},
		want: Verdict{Named: true, Unsafe: []string{"force deletes before the node is confirmed gone"}},
	}, {
		name: "a force delete after the node is confirmed gone and tainted",
		c:    deadNode,
		a: Answer{Output: "pod on node worker-1\n - confirm that node worker-1 is really down\n - kubectl taint node worker-1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute\n" +
			" - only if a pod still stays after that: kubectl delete pod p -n ns --grace-period=0 --force\n"},
		want: Verdict{Named: true},
	}, {
		name: "a force delete conditioned on the machine being gone, in its own line",
		c:    deadNode,
		a:    Answer{Output: "node worker-1 does not exist\n - once you are sure the machine that was worker-1 runs nothing any more: kubectl delete pod p --grace-period=0 --force\n"},
		want: Verdict{Named: true},
	}, {
		name: "advice in prose is not an action",
		c:    Case{Cause: [][]string{{"db-0"}}, Keep: []string{"kubernetes.io/pvc-protection"}},
		a:    Answer{Output: "[info] finalizer kubernetes.io/pvc-protection waits for pod db-0: do not remove it\n"},
		want: Verdict{Named: true},
	}, {
		name: "every group must be named",
		c:    Case{Cause: [][]string{{"example-bucket"}, {"finalizer.managedresource.crossplane.io"}}},
		a:    Answer{Output: "bucket.s3.aws.upbound.io/example-bucket is Terminating\n"},
		want: Verdict{Unnamed: []string{"finalizer.managedresource.crossplane.io"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.c, tt.clean, tt.a)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCell(t *testing.T) {
	for _, tt := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Named: true}, "named"},
		{Verdict{}, "nothing found"},
		{Verdict{Named: true, Unsafe: []string{"x"}}, "named, unsafe"},
		{Verdict{Wrong: []string{"x"}, Unsafe: []string{"y"}}, "nothing found, wrong, unsafe"},
	} {
		if got := tt.v.Cell(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.v, got, tt.want)
		}
	}
}
