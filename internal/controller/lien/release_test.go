//go:build integration

package lien

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestRefusedReleaseIsNotHeld: a controller whose identity the tamper
// policy does not trust (the README's install path before the controller
// checked its identity) cannot release a lien. Once the holder is gone the
// lien must not say a holder holds it: Held=False, ReleaseRefused, the
// holder Gone in status, Ready saying why; and the object stays protected.
func TestRefusedReleaseIsNotHeld(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "refused")
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}}
	for _, o := range []client.Object{holder, kept} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "kept"}},
			HeldBy:  []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "holder"}},
			Reason:  "r",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, kept, lien.LabelDeny)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)

	// The controller again, as a cluster admin the policies do not trust.
	stopController()
	untrusted := rest.CopyConfig(cfg)
	untrusted.Impersonate = rest.ImpersonationConfig{UserName: "someone-else", Groups: []string{"system:masters"}}
	if err := startControllerAs(untrusted); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopController()
		if err := startController(); err != nil {
			t.Fatal(err)
		}
	}()
	if err := k.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	held := waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionFalse, v1alpha1.ReasonReleaseRefused)
	if !strings.Contains(held.Message, "no holder is left") {
		t.Errorf("Held message %q should say no holder is left", held.Message)
	}
	if len(l.Status.HeldBy) != 1 || l.Status.HeldBy[0].State != v1alpha1.StateGone {
		t.Errorf("status.heldBy %v, want the holder Gone", l.Status.HeldBy)
	}
	ready := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAdmissionDenied)
	if !strings.Contains(ready.Message, "teardown install --controller-user") {
		t.Errorf("Ready message %q should say how to trust the controller", ready.Message)
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(kept), kept); err != nil || kept.Labels[lien.Label] != lien.LabelDeny {
		t.Errorf("the Secret after the refused release: %v, label %q; want still protected", err, kept.Labels[lien.Label])
	}
}

// TestReleaseFindsEveryKindItMarked: a Lien protects ConfigMaps; while the
// controller is down (killed between marking an object and recording it in
// status), a ConfigMap carries the lien's entry that status does not list,
// and the lien's spec moves to Secrets. Once the controller is back, every
// ConfigMap loses the entry at once, with no event on them: the release
// lists each kind status.marked names, not only those the spec names now.
// Before, it looked only at the kinds of the current spec and at
// status.protected, and the unlisted ConfigMap kept the Deny entry until
// something touched it.
func TestReleaseFindsEveryKindItMarked(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "marked")
	a1 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a1", Labels: map[string]string{"app": "a"}}}
	b1 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b1", Labels: map[string]string{"app": "b"}}}
	for _, o := range []client.Object{a1, b1} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	l := selectorLien(ns, "moves", configMapKind, map[string]string{"app": "a"})
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, a1, lien.LabelDeny)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	if want := []v1alpha1.MarkedKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns}}; !slices.Equal(l.Status.Marked, want) {
		t.Errorf("status.marked %v, want %v", l.Status.Marked, want)
	}

	stopController()
	running := false
	defer func() {
		if !running {
			if err := startController(); err != nil {
				t.Fatal(err)
			}
		}
	}()
	// What a controller killed after marking a2, before writing the status,
	// leaves (k is trusted, as the controller is).
	a2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a2"}}
	if _, err := lien.Set(a2, entryFor(lienObj{l})); err != nil {
		t.Fatal(err)
	}
	if err := k.Create(ctx, a2); err != nil {
		t.Fatal(err)
	}
	l.Spec.Protect = []v1alpha1.LienTarget{selectorTarget(secretKind, map[string]string{"app": "b"})}
	if err := k.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := startController(); err != nil {
		t.Fatal(err)
	}
	running = true

	waitLabel(t, b1, lien.LabelDeny)
	for _, cm := range []*corev1.ConfigMap{a1, a2} {
		eventually(t, 30*time.Second, "the entry off ConfigMap "+cm.Name, func(ctx context.Context) (bool, error) {
			if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
				return false, err
			}
			return cm.Labels[lien.Label] == "" && cm.Annotations[lien.Annotation] == "", nil
		})
	}
	eventually(t, 30*time.Second, "status.marked to name only Secrets", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
			return false, err
		}
		return slices.Equal(l.Status.Marked, []v1alpha1.MarkedKind{{APIVersion: "v1", Kind: "Secret", Namespace: ns}}), nil
	})
	for _, cm := range []*corev1.ConfigMap{a1, a2} {
		if err := k.Delete(ctx, cm); err != nil {
			t.Errorf("deleting ConfigMap %s after the release: %v", cm.Name, err)
		}
	}
}
