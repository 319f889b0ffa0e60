package dependents

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// counted returns a read that answers gone (or err) and counts its calls.
func counted(gone bool, err error) (func() (bool, error), *atomic.Int64) {
	var n atomic.Int64
	return func() (bool, error) { n.Add(1); return gone, err }, &n
}

func TestGoneOwnersRemembersOnlyGone(t *testing.T) {
	ctx := t.Context()
	g := newGoneOwners()
	goneKey := ownerKey{Kind: "ConfigMap", Namespace: "a", Name: "gone", UID: "u1"}
	aliveKey := ownerKey{Kind: "ConfigMap", Namespace: "a", Name: "alive", UID: "u2"}
	failKey := ownerKey{Kind: "ConfigMap", Namespace: "a", Name: "fail", UID: "u3"}

	readGone, goneReads := counted(true, nil)
	readAlive, aliveReads := counted(false, nil)
	readFail, failReads := counted(false, errors.New("unavailable"))
	for range 3 {
		if gone, err := g.check(ctx, goneKey, readGone); !gone || err != nil {
			t.Fatalf("gone owner: %v, %v", gone, err)
		}
		if gone, err := g.check(ctx, aliveKey, readAlive); gone || err != nil {
			t.Fatalf("alive owner: %v, %v", gone, err)
		}
		if _, err := g.check(ctx, failKey, readFail); err == nil {
			t.Fatal("a failed read reported no error")
		}
	}
	// Gone is read once and remembered; alive and failures are read every time.
	if diff := cmp.Diff([]int64{1, 3, 3}, []int64{goneReads.Load(), aliveReads.Load(), failReads.Load()}); diff != "" {
		t.Errorf("reads of gone, alive, failing owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, false, false}, []bool{g.known(goneKey), g.known(aliveKey), g.known(failKey)}); diff != "" {
		t.Errorf("known gone, alive, failing owner (-want +got):\n%s", diff)
	}
}

func TestGoneOwnersSharesConcurrentReads(t *testing.T) {
	g := newGoneOwners()
	k := ownerKey{Kind: "ConfigMap", Namespace: "a", Name: "owner", UID: "u1"}
	inFlight, release := make(chan struct{}), make(chan struct{})
	var reads atomic.Int64
	read := func() (bool, error) {
		if reads.Add(1) == 1 {
			close(inFlight)
		}
		<-release
		return true, nil
	}
	const callers = 8
	results := make(chan bool, callers)
	var wg sync.WaitGroup
	check := func() {
		defer wg.Done()
		gone, _ := g.check(t.Context(), k, read)
		results <- gone
	}
	wg.Add(callers)
	go check()
	<-inFlight // the others ask while the first read is in flight
	for range callers - 1 {
		go check()
	}
	close(release)
	wg.Wait()
	close(results)
	for gone := range results {
		if !gone {
			t.Error("a caller was told the owner is not gone")
		}
	}
	if got := reads.Load(); got != 1 {
		t.Errorf("%d live reads for %d concurrent checks of one owner, want 1", got, callers)
	}
}

func TestGoneOwnersIsBounded(t *testing.T) {
	g := newGoneOwners()
	key := func(i int) ownerKey {
		return ownerKey{Kind: "ConfigMap", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))}
	}
	read, _ := counted(true, nil)
	for i := range goneMemoSize + 1 {
		if _, err := g.check(t.Context(), key(i), read); err != nil {
			t.Fatal(err)
		}
	}
	if g.known(key(0)) {
		t.Errorf("the oldest entry is still remembered beyond %d entries", goneMemoSize)
	}
	if !g.known(key(goneMemoSize)) {
		t.Error("the newest entry is not remembered")
	}
}

// TestOwnerKey: the memo tells owners apart by group, kind, namespace, name
// and UID, not by UID alone, and not by version.
func TestOwnerKey(t *testing.T) {
	base := links.OwnerLink{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "a", Name: "w", UID: "u1"}
	with := func(f func(*links.OwnerLink)) links.OwnerLink { l := base; f(&l); return l }
	for _, tc := range []struct {
		name string
		link links.OwnerLink
		same bool
	}{
		{"another version", with(func(l *links.OwnerLink) { l.APIVersion = "example.com/v2" }), true},
		{"another group", with(func(l *links.OwnerLink) { l.APIVersion = "other.example.com/v1" }), false},
		{"another kind", with(func(l *links.OwnerLink) { l.Kind = "Gadget" }), false},
		{"another namespace", with(func(l *links.OwnerLink) { l.Namespace = "b" }), false},
		{"another name", with(func(l *links.OwnerLink) { l.Name = "v" }), false},
		{"re-created: another UID", with(func(l *links.OwnerLink) { l.UID = "u2" }), false},
	} {
		if got := keyOf(tc.link) == keyOf(base); got != tc.same {
			t.Errorf("%s: same key = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func TestDeletedSummary(t *testing.T) {
	a := links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns1", Name: "a", UID: "ua"}
	b := links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns1", Name: "b", UID: "ub"}
	dep := func(name string) deletedDependent {
		return deletedDependent{name: name, obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	}
	var got []string
	s := newDeletedSummary(func(o links.OwnerLink, related *metav1.PartialObjectMetadata, note string) {
		got = append(got, fmt.Sprintf("%s (related %s): %s", o.Name, related.Name, note))
	})
	for i := 11; i >= 0; i-- {
		s.add([]links.OwnerLink{a}, dep(fmt.Sprintf("configmaps ns2/d-%02d", i)))
	}
	s.add([]links.OwnerLink{a, b}, dep("clusterroles shared"))
	s.flush()
	s.flush() // nothing pending: no event
	s.add([]links.OwnerLink{b}, dep("configmaps ns2/later"))
	s.flush()
	want := []string{
		"a (related clusterroles shared): deleted 13 dependent(s), their owner being gone: clusterroles shared, configmaps ns2/d-00, configmaps ns2/d-01, " +
			"configmaps ns2/d-02, configmaps ns2/d-03, configmaps ns2/d-04, configmaps ns2/d-05, configmaps ns2/d-06, configmaps ns2/d-07, configmaps ns2/d-08, and 3 more",
		"b (related clusterroles shared): deleted 1 dependent(s), their owner being gone: clusterroles shared",
		"b (related configmaps ns2/later): deleted 1 dependent(s), their owner being gone: configmaps ns2/later",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
}
