// Package rights explains a request the API server refused teardown's
// controller (a refused.Error, which names the request): it asks
// kube-apiserver (SelfSubjectAccessReview) whether the controller's own
// user holds the right, so that a condition or event can name the missing
// verb and resource, or say that admission, not RBAC, refused it.
package rights

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// Allowed asks kube-apiserver whether the controller's user may make req.
func Allowed(ctx context.Context, c client.Client, req refused.Request) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb:      req.Verb,
			Group:     req.Resource.Group,
			Resource:  req.Resource.Resource,
			Namespace: req.Namespace,
			Name:      req.Name,
		},
	}}
	if err := c.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether teardown may %s %s: %w", req.Verb, req.Resource, err)
	}
	return review.Status.Allowed, nil
}

// Missing says which right the controller lacks and how to grant it.
func Missing(req refused.Request) string {
	where := "cluster-wide"
	if req.Namespace != "" {
		where = "in namespace " + req.Namespace
	}
	return fmt.Sprintf("teardown's controller may not %s %s %s: grant verb %s on resource %s (group %q) with a ClusterRole labelled %s=true",
		req.Verb, req.Resource.Resource, where, req.Verb, req.Resource.Resource, req.Resource.Group, v1alpha1.AggregateToControllerLabel)
}

// Explain tells why the API server refused a request: missing is true,
// and the message names the verb and resource, when RBAC denies the
// controller the right; otherwise admission refused it and the message
// carries the API server's own words. If the review itself fails, the
// refusal is reported as it came.
func Explain(ctx context.Context, c client.Client, e *refused.Error) (missing bool, message string) {
	allowed, rerr := Allowed(ctx, c, e.Request)
	switch {
	case rerr != nil:
		return false, fmt.Sprintf("the API server refused teardown's controller: %v (%v)", e.Err, rerr)
	case !allowed:
		return true, Missing(e.Request)
	default:
		return false, fmt.Sprintf("admission refused teardown's controller to %s %s: %v", e.Verb, e.Resource.Resource, e.Err)
	}
}

var refusedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "teardown_refused_requests_total",
	Help: "Requests of teardown's controllers the API server refused, by controller and reason (MissingPermission: RBAC; AdmissionDenied: admission, a lien's policy among them).",
}, []string{"controller", "reason"})

func init() {
	metrics.Registry.MustRegister(refusedTotal)
}

// Count records one refused request of controller, with the reason its
// condition or event gave.
func Count(controller, reason string) {
	refusedTotal.WithLabelValues(controller, reason).Inc()
}
