//go:build integration

package dependents

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// legacyDependent creates a ClusterRole linked to n owners that never
// existed (ConfigMaps in ns). kube-apiserver refuses more than 32 links
// from anyone but teardown's controller users, which the suite's admin is:
// this is how a dependent written before the policy looks.
func legacyDependent(t *testing.T, name, ns string, n int) {
	t.Helper()
	ls := make([]links.OwnerLink, n)
	for i := range ls {
		ls[i] = links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("o-%d", i), UID: types.UID(fmt.Sprintf("%s-%d", ns, i))}
	}
	v, err := links.Format(ls)
	if err != nil {
		t.Fatal(err)
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{links.OwnedLabel: "true"}, Annotations: map[string]string{links.OwnersAnnotation: v}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// TestFanOutIsBounded: a dependent with 1,800 owner links (issue 12's
// fan-out row: 1,800 live GETs) costs no GET of any owner: it is read as
// malformed, an InvalidOwner event says the limit, and it is kept. One
// with exactly 32 links to owners that never existed is collected with
// one GET per owner.
func TestFanOutIsBounded(t *testing.T) {
	run := startController(t, nil)
	legacyDependent(t, "fanout-1800", "fan-1800", 1800)
	legacyDependent(t, "fanout-32", "fan-32", links.MaxOwners)

	gone(t, "clusterrole/fanout-32", getCR("fanout-32"))
	msg := eventMessage(t, metav1.NamespaceDefault, "ClusterRole", "fanout-1800", v1alpha1.ReasonInvalidOwner)
	if want := "1800 owner links, at most 32 are allowed; none of them is checked"; !strings.Contains(msg, want) {
		t.Errorf("InvalidOwner message = %q, want it to contain %q", msg, want)
	}
	mustExist(t, "clusterrole/fanout-1800", getCR("fanout-1800"))
	gets := map[string]int{}
	for _, c := range run.calls.snapshot() {
		for _, ns := range []string{"fan-1800", "fan-32"} {
			if strings.HasPrefix(c, "GET /api/v1/namespaces/"+ns+"/configmaps/") {
				gets[ns]++
			}
		}
	}
	if gets["fan-1800"] != 0 || gets["fan-32"] != links.MaxOwners {
		t.Errorf("live GETs of owners: %v, want none for the dependent with 1800 links and %d for the one with 32", gets, links.MaxOwners)
	}
}
