package refused

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWrapKind(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	forbidden := apierrors.NewForbidden(secrets, "s", errors.New("no"))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	for _, tt := range []struct {
		name string
		err  error
		gvk  schema.GroupVersionKind
		want *Request // nil: err comes back as it is
	}{
		{
			name: "a Forbidden names the mapped resource",
			err:  forbidden,
			gvk:  schema.GroupVersionKind{Version: "v1", Kind: "Secret"},
			want: &Request{Verb: "patch", Resource: secrets, Namespace: "ns", Name: "s"},
		},
		{
			name: "a kind the mapper does not know stands for its resource",
			err:  forbidden,
			gvk:  schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
			want: &Request{Verb: "patch", Resource: schema.GroupResource{Group: "example.com", Resource: "Widget"}, Namespace: "ns", Name: "s"},
		},
		{
			name: "another error passes",
			err:  apierrors.NewConflict(secrets, "s", errors.New("changed")),
			gvk:  schema.GroupVersionKind{Version: "v1", Kind: "Secret"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := fmt.Errorf("patching: %w", WrapKind(tt.err, mapper, "patch", tt.gvk, "ns", "s"))
			var re *Error
			if !errors.As(got, &re) {
				if tt.want != nil {
					t.Fatalf("%v is no refused.Error", got)
				}
				if !errors.Is(got, tt.err) {
					t.Errorf("%v does not wrap %v", got, tt.err)
				}
				return
			}
			if tt.want == nil {
				t.Fatalf("%v wrapped as refused", tt.err)
			}
			if diff := cmp.Diff(*tt.want, re.Request); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if !apierrors.IsForbidden(got) || re.Error() != tt.err.Error() {
				t.Errorf("the Forbidden is not kept as it came: %v", got)
			}
		})
	}
}
