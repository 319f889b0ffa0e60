package resource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		want    Arg
		wantErr string
	}{
		{args: []string{"ns/foohome"}, want: Arg{Resource: "ns", Name: "foohome"}},
		{args: []string{"deployment.apps/web"}, want: Arg{Resource: "deployment.apps", Name: "web"}},
		{args: []string{"Foo.example.com/myfoo"}, want: Arg{Resource: "Foo.example.com", Name: "myfoo"}},
		{args: []string{"namespace", "foohome"}, want: Arg{Resource: "namespace", Name: "foohome"}},
		{args: nil, wantErr: "missing argument: want KIND/NAME"},
		{args: []string{"foohome"}, wantErr: `argument "foohome": want KIND/NAME or KIND NAME`},
		{args: []string{"ns/"}, wantErr: `argument "ns/": want KIND/NAME, with neither part empty`},
		{args: []string{"a/b/c"}, wantErr: `argument "a/b/c": want KIND/NAME, with neither part empty`},
		{args: []string{"ns/a", "b"}, wantErr: `arguments "ns/a b": want KIND NAME or KIND/NAME, not both`},
		{args: []string{"a", "b", "c"}, wantErr: "one object at a time: got 3 arguments, want KIND/NAME"},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.args)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("ParseArgs(%q) = %v, want usage error %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseArgs(%q): %v", tt.args, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseArgs(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestResolve(t *testing.T) {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{core, apps})
	m.Add(core.WithKind("Namespace"), meta.RESTScopeRoot)
	m.Add(core.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m.Add(apps.WithKind("Deployment"), meta.RESTScopeNamespace)
	tests := []struct {
		arg    string
		gvr    schema.GroupVersionResource
		nsed   bool
		errMsg string
	}{
		{arg: "namespace", gvr: core.WithResource("namespaces")},
		{arg: "namespaces", gvr: core.WithResource("namespaces")},
		{arg: "Namespace", gvr: core.WithResource("namespaces")},
		{arg: "configmap", gvr: core.WithResource("configmaps"), nsed: true},
		{arg: "deployments.apps", gvr: apps.WithResource("deployments"), nsed: true},
		{arg: "Deployment.apps", gvr: apps.WithResource("deployments"), nsed: true},
		{arg: "deployments.v1.apps", gvr: apps.WithResource("deployments"), nsed: true},
		{arg: "frobnicator", errMsg: `the server doesn't have a resource type "frobnicator"`},
	}
	for _, tt := range tests {
		got, err := Resolve(m, Arg{Resource: tt.arg, Name: "x"}, "ns1")
		if tt.errMsg != "" {
			if err == nil || err.Error() != tt.errMsg || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("Resolve(%s) = %v, want usage error %q", tt.arg, err, tt.errMsg)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%s): %v", tt.arg, err)
			continue
		}
		if got.GVR != tt.gvr || got.Namespaced != tt.nsed || (tt.nsed && got.Namespace != "ns1") || (!tt.nsed && got.Namespace != "") {
			t.Errorf("Resolve(%s) = %+v", tt.arg, got)
		}
	}
}
