package peers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every run of the corpus (a golden file of internal/cli/why) is a case
// here, and nothing else is.
func TestCasesAreTheCorpus(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("..", "cli", "why", "testdata", "corpus", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range goldens {
		ids = append(ids, strings.TrimSuffix(filepath.Base(g), ".golden"))
	}
	slices.Sort(ids)
	if diff := cmp.Diff(ids, CaseIDs()); diff != "" {
		t.Errorf("cases (-corpus +declared):\n%s", diff)
	}
	for id, c := range Cases {
		if !strings.HasPrefix(c.Issue, "https://github.com/") || len(c.Cause) == 0 {
			t.Errorf("%s: an issue's address and a cause are needed", id)
		}
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Answer{Tool: "knsk", Command: "knsk --no-color --kubeconfig KUBECONFIG", Exit: 0, Output: "\nKubernetes NameSpace Killer\n\nok\n"}
	if err := Write(dir, "longhorn-namespace", want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAnswers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]map[string]Answer{"longhorn-namespace": {"knsk": want}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, "longhorn-namespace", "kor.txt"), []byte("no header\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnswers(dir); err == nil {
		t.Error("an answer without its header was read")
	}
}

func TestTable(t *testing.T) {
	saved := Cases
	t.Cleanup(func() { Cases = saved })
	Cases = map[string]Case{
		"argocd":  {Issue: "https://github.com/argoproj/argo-cd/issues/1", Cause: [][]string{{"resources-finalizer.argocd.argoproj.io"}}, Keep: []string{"resources-finalizer.argocd.argoproj.io"}},
		"metrics": {Issue: "https://github.com/kubernetes/kubernetes/issues/2", Cause: [][]string{{"v1beta1.metrics.k8s.io"}}, Keep: []string{"kubernetes"}},
	}
	built := []Built{
		{Name: "knsk", Module: "github.com/thyarles/knsk", Version: "abc", Resolved: "v0.0.0-2020-abc", Bin: "peers/knsk"},
		{Name: "kor", Module: "github.com/yonahd/kor", Version: "v1", Error: "github.com/yonahd/kor@v1: reading the module proxy: 403 Forbidden"},
	}
	answers := map[string]map[string]Answer{
		"argocd": {
			"teardown": {Exit: 1, Output: "[BLOCKING] finalizer resources-finalizer.argocd.argoproj.io: waiting for Argo CD\n"},
			"knsk":     {Output: "Checking for stuck resources in the cluster... found\n" + `kubectl patch application/a --type json --patch='[ { "op": "remove", "path": "/metadata/finalizers" } ]'` + "\n"},
		},
		"metrics": {
			"teardown": {Exit: 1, Output: "[BLOCKING] APIService v1beta1.metrics.k8s.io is unavailable\n"},
			"knsk":     {Output: "Checking for unavailable apiservices... found\n.: Broken -> v1beta1.metrics.k8s.io... deletion skipped\n"},
		},
	}
	got := Table(Recording{Date: "2026-12-06", Commit: "abc1234", Kubernetes: "v1.37.2", Link: "peers"}, built, answers)
	want := `Recorded on 2026-12-06 at commit abc1234 against the local control plane (Kubernetes v1.37.2): 2 runs of the corpus's cases; raw answers in [peers](peers).

| tool | module@version | obtained |
| --- | --- | --- |
| teardown | this repository at the commit above | built |
| knsk | ` + "`github.com/thyarles/knsk@abc (v0.0.0-2020-abc)`" + ` | built |
| kor | ` + "`github.com/yonahd/kor@v1`" + ` | no: reading the module proxy: 403 Forbidden |

| case | teardown | knsk | kor |
| --- | --- | --- | --- |
| [argocd](https://github.com/argoproj/argo-cd/issues/1) | [named](peers/argocd/teardown.txt) | [nothing found, unsafe](peers/argocd/knsk.txt) | not run |
| [metrics](https://github.com/kubernetes/kubernetes/issues/2) | [named](peers/metrics/teardown.txt) | [named](peers/metrics/knsk.txt) | not run |
| **total** | **named 2/2**, wrong 0, unsafe 0 | **named 1/2**, wrong 0, unsafe 1 | not run |

Why, where a verdict is not plainly "named":

- knsk on argocd: does not name resources-finalizer.argocd.argoproj.io; removes every finalizer, resources-finalizer.argocd.argoproj.io included
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSplice(t *testing.T) {
	doc := "# doc\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\nafter\n"
	got, err := Splice(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# doc\n\n" + BeginMarker + "\nnew\n" + EndMarker + "\n\nafter\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := Splice("# doc\n", "new\n"); err == nil {
		t.Error("a document without markers was spliced")
	}
}

func TestFirstLine(t *testing.T) {
	in := "github.com/yonahd/kor@v0.6.7: reading https://example.invalid/github.com/yonahd/kor/@v/v0.6.7.info: 403 Forbidden\n\tserver response: This module version is not available."
	if got, want := firstLine(in), "github.com/yonahd/kor@v0.6.7: reading the module proxy: 403 Forbidden"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Run runs a built peer's program with its command line, the kubeconfig
// named in the environment too, and keeps its exit code and output with
// the kubeconfig's path hidden. Here knsk's script is a stand-in that
// echoes what it was given.
func TestRun(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join("peers", "knsk-test")
	script := "echo \"args: $*\"\necho \"env: $KUBECONFIG\" >&2\nexit 3\n"
	if err := os.MkdirAll(filepath.Join(cache, bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, bin, "knsk.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cache, "kubeconfig")
	got, err := Run(t.Context(), Built{Name: "knsk", Bin: bin}, cache, Target{Command: "why", Object: "namespace/x", Namespace: "x"}, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	want := Answer{
		Tool:    "knsk",
		Command: "knsk --no-color --kubeconfig KUBECONFIG --dry-run --delete-all",
		Exit:    3,
		Output:  "args: --no-color --kubeconfig KUBECONFIG --dry-run --delete-all\nenv: KUBECONFIG\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Run(t.Context(), Built{Name: "kor", Error: "refused"}, cache, Target{}, kubeconfig); err == nil {
		t.Error("a peer that was not built ran")
	}
}

func TestPeerCommands(t *testing.T) {
	for _, tt := range []struct {
		peer string
		t    Target
		want []string
	}{
		{"finalizer-doctor", Target{Command: "why", Object: "customresourcedefinition/buckets.s3.aws.upbound.io"},
			[]string{"customresourcedefinitions.apiextensions.k8s.io/buckets.s3.aws.upbound.io", "--kubeconfig", "K"}},
		{"finalizer-doctor", Target{Command: "why", Object: "pvc/data", Namespace: "corpus-pvc"}, []string{"pvc/data", "--kubeconfig", "K", "-n", "corpus-pvc"}},
		{"finalizer-doctor", Target{Command: "why", Object: "namespace/corpus-flux-system", Namespace: "corpus-flux-system"}, []string{"namespace/corpus-flux-system", "--kubeconfig", "K"}},
		{"finalizer-doctor", Target{Command: "orphans", Namespace: "ns"}, []string{"--all", "--kubeconfig", "K"}},
		{"kor", Target{Command: "why", Object: "namespace/x", Namespace: "x"}, []string{"finalizer", "--kubeconfig", "K", "--include-namespaces", "x"}},
		{"kor", Target{Command: "orphans"}, []string{"all", "--kubeconfig", "K", "--show-reason"}},
		{"kubectl-check-ownerreferences", Target{Command: "orphans"}, []string{"--kubeconfig", "K"}},
	} {
		p, ok := PeerNamed(tt.peer)
		if !ok {
			t.Fatalf("no peer %s", tt.peer)
		}
		if diff := cmp.Diff(tt.want, p.Args(tt.t, "K")); diff != "" {
			t.Errorf("%s on %+v (-want +got):\n%s", tt.peer, tt.t, diff)
		}
	}
}

func TestKnskClean(t *testing.T) {
	p, _ := PeerNamed("knsk")
	nothing := "\nKubernetes NameSpace Killer\n\nChecking if kubectl is configured... ok\n\nChecking for unavailable apiservices... not found\n\nChecking for stuck namespaces... not found\n"
	stuck, idle := Cases["longhorn-namespace"], Cases["kyverno-leftover-webhook"]
	if !p.Clean(stuck, 0, nothing) {
		t.Error("knsk's all-clear on a stuck namespace not read as saying nothing holds")
	}
	if p.Clean(idle, 0, nothing) {
		t.Error("knsk's all-clear where nothing is being deleted read as a wrong claim")
	}
	found := nothing + "\nChecking for stuck resources in the cluster... found\n.: Stuck -> pod/p on namespace ns... deletion skipped\n"
	if p.Clean(stuck, 0, found) {
		t.Error("knsk's finding read as an all-clear")
	}
}
