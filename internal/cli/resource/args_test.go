package resource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// served is what the fake discovery serves: a core kind of each scope, a
// kind in a group with a short name, and a custom resource.
var served = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "namespaces", Kind: "Namespace", ShortNames: []string{"ns"}, Verbs: []string{"get", "list"}},
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, ShortNames: []string{"cm"}, Verbs: []string{"get", "list"}},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, ShortNames: []string{"deploy"}, Verbs: []string{"get", "list"}},
	}},
	{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "foos", Kind: "Foo", Namespaced: true, Verbs: []string{"get", "list"}},
	}},
}

// TestResolve: the argument forms kubectl takes, resolved through the
// clients' mapper by cli-runtime's builder, and the wrong ones refused as
// usage errors. Reading the object is proven by the why and plan suites.
func TestResolve(t *testing.T) {
	cached, mapper := mapperFor(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served}})
	c := &Clients{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Discovery: cached, Mapper: mapper}
	type resolved struct {
		GVR       schema.GroupVersionResource
		Namespace string
		Name      string
	}
	namespace := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	foos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "foos"}
	tests := []struct {
		args    []string
		want    resolved
		wantErr string
	}{
		{args: []string{"ns/foohome"}, want: resolved{namespace, "", "foohome"}},
		{args: []string{"namespace/foohome"}, want: resolved{namespace, "", "foohome"}},
		{args: []string{"namespaces/foohome"}, want: resolved{namespace, "", "foohome"}},
		{args: []string{"Namespace/foohome"}, want: resolved{namespace, "", "foohome"}},
		{args: []string{"namespace", "foohome"}, want: resolved{namespace, "", "foohome"}},
		{args: []string{"cm/settings"}, want: resolved{configMaps, "ns1", "settings"}},
		{args: []string{"configmap", "settings"}, want: resolved{configMaps, "ns1", "settings"}},
		{args: []string{"deploy/web"}, want: resolved{deployments, "ns1", "web"}},
		{args: []string{"deployments.apps/web"}, want: resolved{deployments, "ns1", "web"}},
		{args: []string{"Deployment.apps/web"}, want: resolved{deployments, "ns1", "web"}},
		{args: []string{"deployments.v1.apps/web"}, want: resolved{deployments, "ns1", "web"}},
		{args: []string{"foo.example.com/myfoo"}, want: resolved{foos, "ns1", "myfoo"}},
		{args: []string{"Foo.example.com", "myfoo"}, want: resolved{foos, "ns1", "myfoo"}},
		{args: []string{"foohome"}, wantErr: `argument "foohome": want KIND/NAME or KIND NAME`},
		{args: []string{"ns/a", "b"}, wantErr: `arguments "ns/a b": want KIND NAME or KIND/NAME, not both`},
		{args: []string{"ns/"}, wantErr: "arguments in resource/name form must have a single resource and name"},
		{args: []string{"a/b/c"}, wantErr: "arguments in resource/name form may not have more than one slash"},
		{args: []string{"ns,cm", "x"}, wantErr: "you may only specify a single resource type"},
		{args: []string{"ns", "a", "b"}, wantErr: `arguments "ns a b": one object at a time`},
		{args: []string{"frobnicator/x"}, wantErr: `the server doesn't have a resource type "frobnicator"`},
		{args: []string{"deployments.example.com/x"}, wantErr: `the server doesn't have a resource type "deployments" in group "example.com"`},
	}
	for _, tt := range tests {
		info, err := Resolve(c, "ns1", tt.args...)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("Resolve(%q) = %v, want usage error %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.args, err)
			continue
		}
		got := resolved{info.Mapping.Resource, info.Namespace, info.Name}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Resolve(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestCheckArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"ns/foohome"}},
		{args: []string{"ns", "foohome"}},
		{args: []string{"foohome"}, wantErr: `argument "foohome": want KIND/NAME or KIND NAME`},
		{args: []string{"ns", "a/b"}, wantErr: `arguments "ns a/b": want KIND NAME or KIND/NAME, not both`},
	}
	for _, tt := range tests {
		err := CheckArgs(tt.args)
		if got := errString(err); got != tt.wantErr || err != nil && cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("CheckArgs(%q) = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
