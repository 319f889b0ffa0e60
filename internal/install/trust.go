package install

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// PolicyConfigMap holds the lien tamper policy's parameters: who may change
// lien markers.
const PolicyConfigMap = "teardown-policy"

// Trust is who the lien policies let change lien markers: the controller's
// users, and people in the break-glass groups.
type Trust struct {
	ControllerUsers  []string
	BreakGlassGroups []string
}

// ReadTrust reads the trust the installed policies use.
func ReadTrust(ctx context.Context, cs kubernetes.Interface) (Trust, error) {
	cm, err := cs.CoreV1().ConfigMaps(Namespace).Get(ctx, PolicyConfigMap, metav1.GetOptions{})
	if err != nil {
		return Trust{}, fmt.Errorf("reading ConfigMap %s/%s, the lien policies' parameters: %w", Namespace, PolicyConfigMap, err)
	}
	return Trust{ControllerUsers: list(cm.Data["controllerUsers"]), BreakGlassGroups: list(cm.Data["breakGlassGroups"])}, nil
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

func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
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
