package controller

import (
	"context"
	"fmt"
	"io"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
)

// trustedConfig decides who the controller acts as. Only the identities in
// the tamper policy's ConfigMap may change lien markers, so a controller
// acting as anyone else protects nothing and releases nothing. It keeps
// cfg's own identity when the policies trust it; else, when that identity
// may impersonate the controller's service account (a cluster admin
// running it from a workstation), it acts as that service account; else it
// refuses to start and says how to fix it.
func trustedConfig(ctx context.Context, cfg *rest.Config, log io.Writer) (*rest.Config, error) {
	who, err := install.WhoAmI(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	trust, err := install.ReadTrust(ctx, cfg)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("teardown is not installed on this cluster (no Trust %s): run `teardown install` first", v1alpha1.TrustName)
	case apierrors.IsForbidden(err):
		// The in-cluster service account may not read it, and is trusted
		// by install itself.
		fmt.Fprintf(log, "teardown controller: acting as %s; cannot read whom the lien policies trust (%v)\n", who.Username, err)
		return cfg, nil
	case err != nil:
		return nil, err
	}
	if trust.Trusts(who.Username, who.Groups) {
		fmt.Fprintf(log, "teardown controller: acting as %s, whom the lien policies trust\n", who.Username)
		return cfg, nil
	}
	if cfg.Impersonate.UserName == "" && trust.Trusts(install.ControllerUser, nil) {
		may, err := mayImpersonateController(ctx, cs)
		if err != nil {
			return nil, err
		}
		if may {
			as := rest.CopyConfig(cfg)
			as.Impersonate = rest.ImpersonationConfig{UserName: install.ControllerUser}
			fmt.Fprintf(log, "teardown controller: acting as %s (impersonated by %s): the lien policies trust the service account, not %s\n",
				install.ControllerUser, who.Username, who.Username)
			return as, nil
		}
	}
	return nil, fmt.Errorf("the lien policies do not trust %s (they trust %s), so this controller could neither protect nor release anything; "+
		"either trust it: `teardown install --controller-user %s`, or act as the controller's service account: `teardown controller --as %s` (needs the right to impersonate it)",
		who.Username, trust, who.Username, install.ControllerUser)
}

// mayImpersonateController asks kube-apiserver whether this identity may
// impersonate the controller's service account.
func mayImpersonateController(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "impersonate", Resource: "serviceaccounts", Namespace: install.Namespace, Name: "teardown-controller",
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking whether this identity may impersonate %s: %w", install.ControllerUser, err)
	}
	return r.Status.Allowed, nil
}
