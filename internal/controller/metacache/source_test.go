//go:build integration

package metacache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/teardown-dev/teardown/internal/testenv"
)

// TestFollowersShareOneWatchPerResource: the objects a source's objects
// follow are watched once per namespace while they are in at most wideAt
// namespaces, by one cluster-wide watch past that, and per namespace again
// at half of it; however many follow, each watch has one handler of the
// source (a handler is two goroutines of client-go's), and a switch loses
// no event.
func TestFollowersShareOneWatchPerResource(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	var (
		mu   sync.Mutex
		seen = map[types.NamespacedName]bool{}
	)
	src := c.NewSourceWideAt(mapper, func(_ context.Context, _ schema.GroupVersionKind, obj, _ *metav1.PartialObjectMetadata) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}}
	}, 2)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	if err := src.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			req, shutdown := queue.Get()
			if shutdown {
				return
			}
			mu.Lock()
			seen[req.NamespacedName] = true
			mu.Unlock()
			queue.Done(req)
		}
	}()
	sawCreated := func(ns, name string) {
		t.Helper()
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "an event of ConfigMap "+ns+"/"+name, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return seen[types.NamespacedName{Namespace: ns, Name: name}], nil
		})
	}
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	var nss []string
	for range 4 {
		nss = append(nss, namespace(t, "follow"))
	}
	follow := func(obj string, nss ...string) {
		t.Helper()
		var sels []Selection
		for _, ns := range nss {
			sels = append(sels, Selection{GVK: cmGVK, Namespace: ns})
		}
		if err := src.Follow(types.NamespacedName{Name: obj}, sels); err != nil {
			t.Fatal(err)
		}
	}
	key := func(ns string) Key { return Key{Resource: configMaps, Namespace: ns} }
	watching := func(want ...Key) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("the ConfigMaps watched by %v", want), func(context.Context) (bool, error) {
			got := slices.DeleteFunc(c.Keys(), func(k Key) bool { return k.Resource != configMaps })
			return cmp.Equal(got, slices.SortedFunc(slices.Values(want), compareKeys)), nil
		})
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, k := range want {
			if s := c.informers[k]; s == nil || s.users != 1 {
				t.Errorf("users of the watch of %s: want the source once", k)
			}
		}
	}

	// Many followers in one namespace: one watch there.
	for i := range 20 {
		follow(fmt.Sprintf("a-%d", i), nss[0])
	}
	watching(key(nss[0]))
	// Two namespaces (wideAt): one watch each.
	follow("b", nss[0], nss[1])
	watching(key(nss[0]), key(nss[1]))
	sawCreated(nss[1], "before-wide")
	// Past wideAt: one watch of every namespace, the others stopped once
	// it has synced; and more followers anywhere add none.
	follow("c", nss[2])
	watching(key(""))
	for i := range 20 {
		follow(fmt.Sprintf("d-%d", i), nss...)
	}
	watching(key(""))
	sawCreated(nss[3], "wide")
	// Down to wideAt namespaces, it stays wide; at half of it, back to one
	// namespace's watch.
	for i := range 20 {
		follow(fmt.Sprintf("d-%d", i))
	}
	watching(key(""))
	follow("b")
	follow("c")
	watching(key(nss[0]))
	sawCreated(nss[0], "narrow-again")
	// The last follower gone, so is the watch.
	for i := range 20 {
		follow(fmt.Sprintf("a-%d", i))
	}
	watching()
}
