//go:build integration

package metacache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/teardown-dev/teardown/internal/testenv"
)

var (
	cfg  *rest.Config
	kube kubernetes.Interface
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(admin *rest.Config) error {
		cfg, kube = admin, kubernetes.NewForConfigOrDie(admin)
		return nil
	}, func() {})
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// counter counts the events a handler was given.
type counter struct{ adds, deletes atomic.Int64 }

func (c *counter) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.adds.Add(1) },
		DeleteFunc: func(any) { c.deletes.Add(1) },
	}
}

func TestUsersOfOneKeyShareOneInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := namespace(t, "shared")
	for i, labels := range []map[string]string{{"teardown.dev/owned": "true", "app": "a"}, {"app": "b"}, {"teardown.dev/owned": "true"}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: labels, Annotations: map[string]string{"note": "not teardown's"}}, Data: map[string]string{"big": "data"}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := Key{Resource: configMaps, Namespace: ns, Labels: "teardown.dev/owned=true"}
	var first, second counter
	a, err := c.Watch(key, nil, first.handler()) // before Start: runs when it does
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	testenv.Eventually(t, 30*time.Second, "the first user synced", func(context.Context) (bool, error) { return a.HasSynced(), nil })
	b, err := c.Watch(key, nil, second.handler())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the second user synced", func(context.Context) (bool, error) { return b.HasSynced(), nil })

	if got := len(c.informers); got != 1 {
		t.Errorf("informers running for two users of one key: %d, want 1", got)
	}
	// Only the labelled objects are held, once, trimmed.
	if got, want := [2]int64{first.adds.Load(), second.adds.Load()}, [2]int64{2, 2}; got != want {
		t.Errorf("adds seen by each user: %v, want %v", got, want)
	}
	oa, okA := a.Get(ns, "cm-0")
	ob, okB := b.Get(ns, "cm-0")
	if !okA || !okB || oa != ob {
		t.Fatalf("both users read cm-0 (%v, %v) as the same copy: %v", okA, okB, oa == ob)
	}
	if _, ok := a.Get(ns, "cm-1"); ok {
		t.Error("cm-1 does not match the selector, and is held")
	}
	if oa.Labels["app"] != "a" || oa.Annotations != nil || oa.ManagedFields != nil || oa.UID == "" || oa.ResourceVersion == "" {
		t.Errorf("cm-0 held as %+v: want trimmed (its labels, within the budget, and none of the annotations or managedFields), with UID and resourceVersion", oa.ObjectMeta)
	}

	// The informer lives while one user holds it, and stops with the last.
	a.Release()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the remaining user saw cm-2 go", func(context.Context) (bool, error) {
		return second.deletes.Load() == 1, nil
	})
	if got := first.deletes.Load(); got != 0 {
		t.Errorf("a released user was given %d delete events", got)
	}
	b.Release()
	if got := len(c.informers); got != 0 {
		t.Errorf("informers running with no user left: %d", got)
	}
}

func TestKeysWithOtherSelectorsAreOtherInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	var users []*Informer
	for _, k := range []Key{
		{Resource: configMaps, Labels: "teardown.dev/owned=true"},
		{Resource: configMaps, Labels: "teardown.dev/owner=true"},
		{Resource: configMaps, Fields: "metadata.name=x"},
		{Resource: configMaps, Labels: "teardown.dev/owned=true"},
	} {
		i, err := c.Watch(k, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, i)
	}
	if got := len(c.informers); got != 3 {
		t.Errorf("informers for 3 distinct keys and one repeated: %d, want 3", got)
	}
	for _, i := range users {
		i.Release()
	}
	if got := len(c.informers); got != 0 {
		t.Errorf("informers running with no user left: %d", got)
	}
}

func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
