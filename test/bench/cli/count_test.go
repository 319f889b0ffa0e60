package cli

import (
	"testing"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

func TestKubectlRows(t *testing.T) {
	out := `NAME               DATA   AGE
cm-00001           1      5m
cm-00002           1      5m
NAME      TYPE     DATA   AGE
secret-1  Opaque   1      5m

NAME                     STATUS    VOLUME   CAPACITY
data-0                   Pending
LAST SEEN   TYPE     REASON    OBJECT              MESSAGE
2m          Normal   Created   lien/keep-release   marked 10 objects
`
	if got := kubectlRows(out); got != 5 {
		t.Errorf("kubectlRows = %d, want 5", got)
	}
}

func TestWhyContent(t *testing.T) {
	out := "namespace/shop is not being deleted; a deletion would be held by 3 findings\n\n" +
		"[BLOCKING] lien keep denies DELETE\n\n" +
		"[info] 20021 objects of 11 kinds would be deleted first in the namespace\n" +
		"    configmap ×8000: not deleted yet: a, b\n"
	objects, kinds, ok := whyContent(out)
	if !ok || objects != 20021 || kinds != 11 {
		t.Errorf("whyContent = %d, %d, %v; want 20021, 11, true", objects, kinds, ok)
	}
	if _, _, ok := whyContent("namespace/empty is not being deleted; nothing found that would hold its deletion\n"); ok {
		t.Error("whyContent found content in an answer without any")
	}
}

func TestByVerb(t *testing.T) {
	calls := []kit.Call{
		{Verb: "get", Path: "/api"}, {Verb: "get", Path: "/apis"},
		{Verb: "list", Resource: "configmaps"}, {Verb: "list", Resource: "configmaps"}, {Verb: "list", Resource: "secrets"},
		{Verb: "get", Resource: "namespaces"},
	}
	if got, want := byVerb(calls), "discovery 2, get 1, list 3 (2 resources)"; got != want {
		t.Errorf("byVerb = %q, want %q", got, want)
	}
}
