package install

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/api/v1alpha1"
)

// Trust is who the lien policies let change lien markers: the controller's
// users, and people in the break-glass groups (the spec of the Trust
// object named teardown).
type Trust struct {
	ControllerUsers  []string
	BreakGlassGroups []string
}

var trustGVR = v1alpha1.GroupVersion.WithResource("trusts")

// ReadTrust reads the trust the installed policies use.
func ReadTrust(ctx context.Context, cfg *rest.Config) (Trust, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Trust{}, err
	}
	u, err := dyn.Resource(trustGVR).Get(ctx, v1alpha1.TrustName, metav1.GetOptions{})
	if err != nil {
		return Trust{}, fmt.Errorf("reading Trust %s, the lien policies' parameters: %w", v1alpha1.TrustName, err)
	}
	var t v1alpha1.Trust
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
		return Trust{}, fmt.Errorf("decoding Trust %s: %w", v1alpha1.TrustName, err)
	}
	return Trust{ControllerUsers: t.Spec.ControllerUsers, BreakGlassGroups: t.Spec.BreakGlassGroups}, nil
}

// Trusts reports whether the policies let user (in groups) change lien markers.
func (t Trust) Trusts(user string, groups []string) bool {
	return slices.Contains(t.ControllerUsers, user) || slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(t.BreakGlassGroups, g) })
}

// String says whom t trusts, for people.
func (t Trust) String() string {
	s := "users " + strings.Join(t.ControllerUsers, ", ")
	if len(t.BreakGlassGroups) > 0 {
		s += "; break-glass groups " + strings.Join(t.BreakGlassGroups, ", ")
	}
	return s
}

// WhoAmI is the identity cfg authenticates as, by a SelfSubjectReview.
func WhoAmI(ctx context.Context, cfg *rest.Config) (authenticationv1.UserInfo, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("asking kube-apiserver who this is (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo, nil
}
