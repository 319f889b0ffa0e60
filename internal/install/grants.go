package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// GrantsRole is the ClusterRole `teardown install --grant` writes: the
// kinds teardown's controller may change, aggregated into its role by the
// label v1alpha1.AggregateToControllerLabel.
const GrantsRole = "teardown-grants"

// Grants are the resources teardown's controller is granted at install
// time, each as RESOURCE (the core group) or GROUP/RESOURCE, as RBAC
// names them: Patch to protect them (lien markers, the finalizers of
// owners and of a plan's trigger), Delete to collect them (linked
// dependents, a plan's steps).
type Grants struct {
	Patch  []string
	Delete []string
}

// Empty reports whether g grants nothing: install then leaves GrantsRole
// as it is.
func (g Grants) Empty() bool { return len(g.Patch) == 0 && len(g.Delete) == 0 }

// grantsRole is GrantsRole granting g: one rule per verb and group,
// groups and resources sorted.
func grantsRole(g Grants) (*unstructured.Unstructured, error) {
	role := &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: GrantsRole, Labels: map[string]string{
			"app.kubernetes.io/name":            "teardown",
			v1alpha1.AggregateToControllerLabel: "true",
		}},
	}
	for _, v := range []struct {
		verb      string
		resources []string
	}{{"delete", g.Delete}, {"patch", g.Patch}} {
		byGroup := map[string][]string{}
		for _, r := range v.resources {
			group, resource, ok := strings.Cut(r, "/")
			if !ok {
				group, resource = "", r
			}
			if resource == "" || strings.Contains(resource, "/") {
				return nil, fmt.Errorf("--grant %s: name a resource as RBAC does, RESOURCE (core group) or GROUP/RESOURCE, e.g. secrets or example.com/foos", r)
			}
			byGroup[group] = append(byGroup[group], resource)
		}
		groups := make([]string, 0, len(byGroup))
		for group := range byGroup {
			groups = append(groups, group)
		}
		slices.Sort(groups)
		for _, group := range groups {
			resources := byGroup[group]
			slices.Sort(resources)
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: slices.Compact(resources), Verbs: []string{v.verb}})
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(role)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// ReportGrants writes what teardown's controller may patch and delete now,
// beyond teardown's own kinds: the rules of the ClusterRoles labelled
// v1alpha1.AggregateToControllerLabel that grant those verbs, by role.
func ReportGrants(ctx context.Context, cfg *rest.Config, out io.Writer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	roles, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.AggregateToControllerLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing the ClusterRoles that grant teardown's controller its rights: %w", err)
	}
	var lines []string
	for _, role := range roles.Items {
		if role.Name == "teardown-controller-base" {
			continue
		}
		if verbs := granted(role.Rules); verbs != "" {
			lines = append(lines, fmt.Sprintf("  clusterrole/%s: %s", role.Name, verbs))
		}
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		fmt.Fprintf(out, "teardown's controller may patch and delete none of your kinds yet: a lien, owner link or plan on them is not in force (Ready=False, MissingPermission) until granted: teardown install --grant RESOURCE,... (patch: protect) --grant-delete RESOURCE,... (delete: collect), or a ClusterRole labelled %s=true\n", v1alpha1.AggregateToControllerLabel)
		return nil
	}
	fmt.Fprintf(out, "teardown's controller is granted, beyond its own kinds (ClusterRoles labelled %s=true):\n%s\n", v1alpha1.AggregateToControllerLabel, strings.Join(lines, "\n"))
	return nil
}

// granted says, for people, which patch and delete rights rules give:
// "patch secrets, foos.example.com; delete configmaps".
func granted(rules []rbacv1.PolicyRule) string {
	var parts []string
	for _, verb := range []string{"patch", "delete", "escalate"} {
		var what []string
		for _, r := range rules {
			if !slices.Contains(r.Verbs, verb) && !slices.Contains(r.Verbs, "*") {
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					name := res
					if g != "" {
						name += "." + g
					}
					if len(r.ResourceNames) > 0 {
						name += " (" + strings.Join(r.ResourceNames, ", ") + ")"
					}
					what = append(what, name)
				}
			}
		}
		if len(what) > 0 {
			slices.Sort(what)
			parts = append(parts, verb+" "+strings.Join(slices.Compact(what), ", "))
		}
	}
	return strings.Join(parts, "; ")
}
