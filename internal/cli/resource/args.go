package resource

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// CheckArgs refuses, before any connection, arguments that cannot name one
// object: a kind without a name, or the two forms mixed. What else is wrong
// with them (an empty part, two slashes, an unknown kind) the builder in
// Get reports.
func CheckArgs(args []string) error {
	switch {
	case len(args) == 1 && !strings.Contains(args[0], "/"):
		return cmdutil.Usagef("argument %q: want KIND/NAME or KIND NAME", args[0])
	case len(args) == 2 && strings.Contains(args[0]+args[1], "/"):
		return cmdutil.Usagef("arguments %q: want KIND NAME or KIND/NAME, not both", strings.Join(args, " "))
	}
	return nil
}

// Get resolves args (Resolve) and reads the object. Its Object is an
// *unstructured.Unstructured. A missing object is an error that names it
// (a finding, exit code 1, for the CLI contract).
func Get(c cliresource.RESTClientGetter, namespace string, args ...string) (*cliresource.Info, error) {
	info, err := Resolve(c, namespace, args...)
	if err != nil {
		return nil, err
	}
	if err := info.Get(); err != nil {
		switch {
		case apierrors.IsNotFound(err) && info.Namespaced():
			return nil, fmt.Errorf("%s not found in namespace %s", Ref(info), info.Namespace)
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%s not found", Ref(info))
		}
		return nil, fmt.Errorf("reading %s: %w", Ref(info), err)
	}
	return info, nil
}

// Resolve maps args to the one object a command is about, the way kubectl
// does it (cli-runtime's resource.Builder): KIND/NAME or KIND NAME, where
// KIND is a resource name, kind or short name with an optional .group or
// .version.group. The object is in namespace unless its kind is
// cluster-scoped. A wrong argument or an unknown kind is a usage error.
func Resolve(c cliresource.RESTClientGetter, namespace string, args ...string) (*cliresource.Info, error) {
	if err := CheckArgs(args); err != nil {
		return nil, err
	}
	infos, err := cliresource.NewBuilder(c).
		Unstructured().
		NamespaceParam(namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(false, args...).
		SingleResourceType().
		RequireObject(false).
		Do().Infos()
	if err != nil {
		return nil, resolveError(args, err)
	}
	if len(infos) != 1 {
		return nil, cmdutil.Usagef("arguments %q: one object at a time", strings.Join(args, " "))
	}
	return infos[0], nil
}

// resolveError: the builder reports a bad argument or an unknown kind as a
// plain error; only what the server or the transport answered is not the
// command line's fault.
func resolveError(args []string, err error) error {
	var status apierrors.APIStatus
	var transport *url.Error
	if errors.As(err, &status) || errors.As(err, &transport) {
		return fmt.Errorf("resolving %s: %w", strings.Join(args, " "), err)
	}
	return &cmdutil.UsageError{Err: err}
}

// Ref is the object as kubectl would print it: kind[.group]/name.
func Ref(info *cliresource.Info) string {
	return KindRef(info.Mapping.GroupVersionKind.GroupKind()) + "/" + info.Name
}

// KindRef is a kind as a person types it: lower case, with its group
// unless it is a core kind.
func KindRef(gk schema.GroupKind) string {
	k := strings.ToLower(gk.Kind)
	if gk.Group == "" {
		return k
	}
	return k + "." + gk.Group
}
