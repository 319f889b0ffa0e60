package refused

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Request is one API request: what a right would have to allow.
type Request struct {
	Verb      string
	Resource  schema.GroupResource
	Namespace string // empty: cluster-wide
	Name      string // empty: a list, or a create
}

// Error is a request the API server refused; Err is its Forbidden.
type Error struct {
	Request
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err in an Error naming req when err is a Forbidden, else err
// as it is.
func Wrap(err error, req Request) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return &Error{Request: req, Err: err}
}

// WrapKind is Wrap for a request on an object of kind gvk: mapper gives
// its resource, looked up only when err is a Forbidden. A kind mapper does
// not know stands for its resource.
func WrapKind(err error, mapper meta.RESTMapper, verb string, gvk schema.GroupVersionKind, namespace, name string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	resource := schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
	if m, merr := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); merr == nil {
		resource = m.Resource.GroupResource()
	}
	return &Error{Request: Request{Verb: verb, Resource: resource, Namespace: namespace, Name: name}, Err: err}
}
