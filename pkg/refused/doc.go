// Package refused names a request the API server refused (403 Forbidden):
// its verb, resource and object. A Forbidden alone does not say whether
// RBAC or admission refused the request, nor which right would let it
// through; the code that made the request knows what it asked, and wraps
// the refusal in an Error (Wrap, WrapKind), so that whoever reports it can
// find out (teardown's controllers ask with a SelfSubjectAccessReview and
// name the missing right) instead of retrying in silence.
//
// The runner of package teardown/runner returns its refusals so wrapped:
//
//	var re *refused.Error
//	if errors.As(err, &re) {
//		log.Info("refused", "verb", re.Verb, "resource", re.Resource, "namespace", re.Namespace, "name", re.Name)
//	}
package refused
