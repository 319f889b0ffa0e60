package why

import (
	"context"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// defaultBreakGlassGroup is the Trust's default spec.breakGlassGroups.
const defaultBreakGlassGroup = "teardown.dev:break-glass"

// BreakGlass is how the user of why may take lien markers off by hand: the
// tamper policy lets only the Trust's controller users and its break-glass
// groups change them, so kubectl must make the request as a member of one.
type BreakGlass struct {
	// Group is the break-glass group named.
	Group string
	// Flags are kubectl's flags that make the request as the user, with
	// the user's own groups (so its rights stay) and Group: "" when the
	// user is trusted already. Impersonating oneself needs the impersonate
	// verb, which a cluster admin has.
	Flags string
}

// gatherBreakGlass reads the Trust's break-glass group and who the user is
// (a SelfSubjectReview); when the user cannot be found out, the flags name
// the user as USER.
func gatherBreakGlass(ctx context.Context, c *resource.Clients) BreakGlass {
	b := BreakGlass{Group: defaultBreakGlassGroup}
	var trusted []string
	if u, err := c.Dynamic.Resource(trustsGVR).Get(ctx, v1alpha1.TrustName, metav1.GetOptions{}); err == nil {
		if groups, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "breakGlassGroups"); len(groups) > 0 {
			b.Group = groups[0]
		}
		trusted, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "controllerUsers")
	}
	review, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		b.Flags = "--as=USER --as-group=" + b.Group
		return b
	}
	me := review.Status.UserInfo
	if slices.Contains(trusted, me.Username) || slices.Contains(me.Groups, b.Group) {
		return b
	}
	flags := []string{"--as=" + me.Username}
	for _, g := range me.Groups {
		if g != "system:authenticated" { // kube-apiserver adds it to every impersonated user
			flags = append(flags, "--as-group="+g)
		}
	}
	b.Flags = strings.Join(append(flags, "--as-group="+b.Group), " ")
	return b
}
