package dependents

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// Bounds of the memo of gone owners: the kube-controller-manager garbage
// collector's absentOwnerCache holds 500 entries; this one holds more, and
// forgets an entry after goneTTL, so its memory stays flat however many
// owners go.
const (
	goneMemoSize = 4096
	goneTTL      = 10 * time.Minute
)

// ownerKey is an owner as a link names it: group and kind (any version),
// namespace, name and UID. Links that differ in any of these are different
// owners to the memo; an owner re-created under the same name has a new UID
// and so a new key.
type ownerKey struct {
	Group, Kind, Namespace, Name string
	UID                          types.UID
}

func keyOf(l links.OwnerLink) ownerKey {
	gk := l.GroupVersionKind().GroupKind()
	return ownerKey{Group: gk.Group, Kind: gk.Kind, Namespace: l.Namespace, Name: l.Name, UID: l.UID}
}

// goneOwners remembers the owners a live GET confirmed gone (404, or
// another UID under the name). A UID that is gone never comes back, so the
// dependents of one owner need one GET between them, not one each. It never
// remembers an owner alive: "alive" is the caches' word, or a live GET's,
// every time. Concurrent checks of one owner share one GET.
type goneOwners struct {
	gone *cache.LRUExpireCache // ownerKey -> struct{}

	mu       sync.Mutex
	inflight map[ownerKey]*lookup
}

// lookup is one live read in flight; done closes when gone and err are set.
type lookup struct {
	done chan struct{}
	gone bool
	err  error
}

func newGoneOwners() *goneOwners {
	return &goneOwners{gone: cache.NewLRUExpireCache(goneMemoSize), inflight: map[ownerKey]*lookup{}}
}

// known reports whether a live read already confirmed k gone.
func (g *goneOwners) known(k ownerKey) bool {
	_, ok := g.gone.Get(k)
	return ok
}

// check reports whether owner k is gone: from the memo, or else from read,
// a live read of the owner, whose "gone" it remembers. Callers checking the
// same owner meanwhile wait for the same read instead of making their own;
// a caller whose ctx ends stops waiting.
func (g *goneOwners) check(ctx context.Context, k ownerKey, read func() (gone bool, err error)) (bool, error) {
	if g.known(k) {
		return true, nil
	}
	g.mu.Lock()
	if l, ok := g.inflight[k]; ok {
		g.mu.Unlock()
		select {
		case <-l.done:
			return l.gone, l.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	l := &lookup{done: make(chan struct{})}
	g.inflight[k] = l
	g.mu.Unlock()

	l.gone, l.err = read()
	if l.err == nil && l.gone {
		g.gone.Add(k, struct{}{}, goneTTL)
	}
	g.mu.Lock()
	delete(g.inflight, k)
	g.mu.Unlock()
	close(l.done)
	return l.gone, l.err
}

// wentHeldTTL is how long an owner seen gone from the owners' informer is
// not read again by name: long enough for its dependents' delete events,
// short enough that an owner re-created under its name is soon held.
const wentHeldTTL = 10 * time.Second

// readTTL is how long an owner read live by a dependent's check serves the
// request to hold it: a copy that old costs at most a conflict (the hold
// is a patch with its resourceVersion).
const readTTL = time.Second

// ownerMemo is what the watcher saw of owners a moment ago, in expiring
// memos bounded as goneOwners is. None of it ever makes teardown delete:
// it only spares a live read, or times a histogram.
type ownerMemo struct {
	// goneAt remembers when an owner was first seen gone (its delete
	// event, or a live GET), for the owner-gone-to-dependent-gone
	// histogram.
	goneAt *cache.LRUExpireCache // types.UID -> time.Time
	// wentHeld remembers the owners the owners' informer saw go while
	// being deleted, so that requests for them need no live GET.
	wentHeld *cache.LRUExpireCache // request -> struct{}
	// read remembers for a moment the owners a dependent's check read
	// live and found alive but not held, for the request to hold them.
	read *cache.LRUExpireCache // request -> *metav1.PartialObjectMetadata
}

func newOwnerMemo() ownerMemo {
	return ownerMemo{
		goneAt:   cache.NewLRUExpireCache(goneMemoSize),
		wentHeld: cache.NewLRUExpireCache(goneMemoSize),
		read:     cache.NewLRUExpireCache(goneMemoSize),
	}
}

// seenGone records when owner uid was first seen gone.
func (m ownerMemo) seenGone(uid types.UID) {
	if _, ok := m.goneAt.Get(uid); !ok {
		m.goneAt.Add(uid, time.Now(), goneTTL)
	}
}

// goneSince tells when owner uid was first seen gone.
func (m ownerMemo) goneSince(uid types.UID) (time.Time, bool) {
	t, ok := m.goneAt.Get(uid)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

// wentWhileHeld records that the owner req names, uid, left the owners'
// informer while being deleted: it is gone.
func (m ownerMemo) wentWhileHeld(req request, uid types.UID) {
	m.seenGone(uid)
	m.wentHeld.Add(req, struct{}{}, wentHeldTTL)
}

// wentAMomentAgo reports whether the owner req names left the owners'
// informer a moment ago while being deleted.
func (m ownerMemo) wentAMomentAgo(req request) bool {
	_, ok := m.wentHeld.Get(req)
	return ok
}

// readLive records owner, just read live and not in the owners' cache,
// for a moment: the owner's other dependents and the request that holds
// it need no GET. It only ever makes a dependent look again: an event of
// the owners' informer forgets it (forgetRead).
func (m ownerMemo) readLive(req request, owner *metav1.PartialObjectMetadata) {
	m.read.Add(req, owner, readTTL)
}

// recentlyRead returns the owner req names if a check read it a moment ago.
func (m ownerMemo) recentlyRead(req request) (*metav1.PartialObjectMetadata, bool) {
	o, ok := m.read.Get(req)
	if !ok {
		return nil, false
	}
	return o.(*metav1.PartialObjectMetadata), true
}

// forgetRead drops the live read of the owner req names: the owners'
// informer knows better than a read made before its event.
func (m ownerMemo) forgetRead(req request) { m.read.Remove(req) }
