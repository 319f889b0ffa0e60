//go:build integration

package sriov

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/testenv"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

var (
	sriovNetworks = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovnetworks"}
	nadResource   = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	ownerRules    = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "ownerrules"}
)

// ownerRuleDoc is where docs/owners.md shows the rule for the operator's
// NADs, which the test applies as written.
const ownerRuleDoc, ownerRuleHeading = "../../docs/owners.md", "## Owner rules: links an operator cannot erase"

// TestOwnerRuleDeletesTheOperatorsNADs: the real operator renders a NAD
// from each SriovNetwork into the namespace spec.networkNamespace names,
// and rewrites it whenever it changes, erasing annotations it did not
// render: an owner link on a NAD does not last (shown first). With the
// operator stopped (crashed, scaled down, uninstalled: its NAD-deleting
// finalizer path gone; on SIGTERM it clears its finalizers from the
// SriovNetworks), deleting the SriovNetworks leaves their NADs behind;
// with docs/owners.md's OwnerRule, applied as written, teardown deletes
// them, and `teardown why` on a NAD, which carries no link, names the rule
// and the SriovNetwork that own it. teardown runs in both halves: without
// the rule it does not delete them.
func TestOwnerRuleDeletesTheOperatorsNADs(t *testing.T) {
	ctx := t.Context()
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardown(ctx); err != nil {
		t.Fatal(err)
	}
	// nads are the NADs the operator rendered, as harness.Leftovers names
	// them.
	nads := func() []string {
		var out []string
		for i, n := range harness.NetworkNamespaces {
			out = append(out, fmt.Sprintf("network-attachment-definitions.k8s.cni.cncf.io %s/net-%c", n, 'a'+i))
		}
		return out
	}()
	// left is what the test left in the namespaces of the NADs, and
	// SriovNetworks.
	left := func(t *testing.T, before map[string]harness.Object) []string {
		t.Helper()
		var out []string
		for _, k := range harness.Leftovers(before, snapshot(t.Context(), t)) {
			if strings.HasPrefix(k, "sriovnetworks.") || slices.ContainsFunc(harness.NetworkNamespaces, func(n string) bool { return strings.Contains(k, " "+n+"/") }) {
				out = append(out, k)
			}
		}
		return out
	}
	// deleteNetworks stops the operator and deletes both SriovNetworks,
	// then waits until they are gone.
	deleteNetworks := func(t *testing.T, e *harness.Env) {
		t.Helper()
		ctx := t.Context()
		e.Operator.Stop()
		for i := range harness.NetworkNamespaces {
			if err := e.Dyn.Resource(sriovNetworks).Namespace(ns).Delete(ctx, fmt.Sprintf("net-%c", 'a'+i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := e.Dyn.Resource(sriovNetworks).Namespace(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
		if err != nil {
			t.Fatalf("the SriovNetworks did not go: %v", err)
		}
	}

	t.Run("without the rule", func(t *testing.T) {
		ctx := t.Context()
		e, before := newEnv(ctx, t, "")
		install(ctx, t, e)
		deleteNetworks(t, e)
		e.Settle(ctx)
		if diff := cmp.Diff(nads, left(t, before)); diff != "" {
			t.Errorf("left without the rule, teardown running (-want +got):\n%s", diff)
		}
	})

	t.Run("with the rule", func(t *testing.T) {
		ctx := t.Context()
		e, before := newEnv(ctx, t, "")
		install(ctx, t, e)
		doc, err := testenv.CodeBlock(ownerRuleDoc, ownerRuleHeading, "yaml")
		if err != nil {
			t.Fatal(err)
		}
		var rule unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(strings.Join(doc, "\n")), &rule.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Dyn.Resource(ownerRules).Create(ctx, &rule, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Dyn.Resource(ownerRules).Delete(context.Background(), rule.GetName(), metav1.DeleteOptions{})
		})

		// The operator erases what it did not render: an owner link,
		// written by the admin, is gone a moment later.
		net, err := e.Dyn.Resource(sriovNetworks).Namespace(ns).Get(ctx, "net-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		link, err := links.Format([]links.OwnerLink{{APIVersion: "sriovnetwork.openshift.io/v1", Kind: "SriovNetwork", Namespace: ns, Name: "net-a", UID: net.GetUID()}})
		if err != nil {
			t.Fatal(err)
		}
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q}}}`, links.OwnedLabel, links.OwnersAnnotation, link)
		nadNS := harness.NetworkNamespaces[0]
		if _, err := e.Dyn.Resource(nadResource).Namespace(nadNS).Patch(ctx, "net-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			nad, err := e.Dyn.Resource(nadResource).Namespace(nadNS).Get(ctx, "net-a", metav1.GetOptions{})
			return err == nil && nad.GetAnnotations()[links.OwnersAnnotation] == "", nil
		})
		if err != nil {
			t.Fatalf("the operator did not rewrite the NAD: %v", err)
		}

		// The rule binds both NADs: both SriovNetworks are held.
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			r, err := e.Dyn.Resource(ownerRules).Get(ctx, rule.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			owners, _, _ := unstructured.NestedInt64(r.Object, "status", "owners")
			list, err := e.Dyn.Resource(sriovNetworks).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			held := 0
			for _, n := range list.Items {
				if slices.Contains(n.GetFinalizers(), links.Finalizer) {
					held++
				}
			}
			return owners == 2 && held == 2, nil
		})
		if err != nil {
			t.Fatalf("the rule did not bind both NADs: %v", err)
		}

		// teardown why on a NAD, which carries no link, names the rule.
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, []string{"teardown", "why", "network-attachment-definitions.k8s.cni.cncf.io/net-a", "-n", nadNS, "--kubeconfig", cluster.KubeconfigPath()}, &out, &errOut)
		t.Logf("$ teardown why network-attachment-definitions.k8s.cni.cncf.io/net-a -n %s (exit %d)\n%s%s", nadNS, code, out.String(), errOut.String())
		if want := "[info] OwnerRule " + rule.GetName() + " binds it to its owner sriovnetworks.sriovnetwork.openshift.io " + ns + "/net-a: teardown deletes it when that owner is deleted"; code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("teardown why on the NAD: exit %d, want 0 and %q", code, want)
		}

		deleteNetworks(t, e)
		e.Settle(ctx)
		if got := left(t, before); len(got) != 0 {
			t.Errorf("left with the rule:\n%s", strings.Join(got, "\n"))
		}
		if e.Operator.Running() {
			t.Error("the operator runs: the NADs may have been its doing")
		}
	})
}
