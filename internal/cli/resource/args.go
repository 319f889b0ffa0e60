package resource

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// Arg is a resource argument as typed: KIND/NAME, KIND.GROUP/NAME or KIND NAME.
type Arg struct {
	Resource string // kind, resource, short name, optionally .group or .version.group
	Name     string
}

func (a Arg) String() string { return a.Resource + "/" + a.Name }

// ParseArgs reads the one object a command is about, in the forms kubectl
// accepts. A wrong form is a usage error.
func ParseArgs(args []string) (Arg, error) {
	switch len(args) {
	case 1:
		res, name, ok := strings.Cut(args[0], "/")
		if !ok {
			return Arg{}, cmdutil.Usagef("argument %q: want KIND/NAME or KIND NAME", args[0])
		}
		if res == "" || name == "" || strings.Contains(name, "/") {
			return Arg{}, cmdutil.Usagef("argument %q: want KIND/NAME, with neither part empty", args[0])
		}
		return Arg{Resource: res, Name: name}, nil
	case 2:
		if strings.Contains(args[0], "/") || strings.Contains(args[1], "/") {
			return Arg{}, cmdutil.Usagef("arguments %q: want KIND NAME or KIND/NAME, not both", strings.Join(args, " "))
		}
		if args[0] == "" || args[1] == "" {
			return Arg{}, cmdutil.Usagef("arguments %q: KIND and NAME must not be empty", strings.Join(args, " "))
		}
		return Arg{Resource: args[0], Name: args[1]}, nil
	case 0:
		return Arg{}, cmdutil.Usagef("missing argument: want KIND/NAME")
	default:
		return Arg{}, cmdutil.Usagef("one object at a time: got %d arguments, want KIND/NAME", len(args))
	}
}

// Target is a resolved argument: which resource, which object.
type Target struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	Namespace  string // empty for cluster-scoped objects
	Name       string
}

// Ref is the target as kubectl would print it: kind[.group]/name.
func (t Target) Ref() string { return KindRef(t.GVK.GroupKind()) + "/" + t.Name }

// KindRef is a kind as a person types it: lower case, with its group
// unless it is a core kind.
func KindRef(gk schema.GroupKind) string {
	k := strings.ToLower(gk.Kind)
	if gk.Group == "" {
		return k
	}
	return k + "." + gk.Group
}

// Resolve maps an argument to its resource the way kubectl does: resource
// names, kinds, short names, with an optional group or version.group.
// namespace applies to namespaced resources only. An unknown kind is a
// usage error.
func Resolve(mapper meta.RESTMapper, arg Arg, namespace string) (Target, error) {
	mapping, err := mappingFor(mapper, arg.Resource)
	if err != nil {
		return Target{}, err
	}
	t := Target{GVR: mapping.Resource, GVK: mapping.GroupVersionKind, Name: arg.Name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		t.Namespaced = true
		t.Namespace = namespace
	}
	return t, nil
}

// mappingFor follows kubectl's resource.Builder: first as a resource
// (pods, deploy, deployments.apps, deployments.v1.apps), then as a kind
// (Deployment, Deployment.apps, Deployment.v1.apps).
func mappingFor(mapper meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	fullGVR, gr := schema.ParseResourceArg(arg)
	gvk := schema.GroupVersionKind{}
	if fullGVR != nil {
		gvk, _ = mapper.KindFor(*fullGVR)
	}
	if gvk.Empty() {
		gvk, _ = mapper.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK == nil {
		gvk := gk.WithVersion("")
		fullGVK = &gvk
	}
	if !fullGVK.Empty() {
		if m, err := mapper.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return m, nil
		}
	}
	m, err := mapper.RESTMapping(gk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, cmdutil.Usagef("the server doesn't have a resource type %q", arg)
		}
		return nil, fmt.Errorf("resolving %q: %w", arg, err)
	}
	return m, nil
}
