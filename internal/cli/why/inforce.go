package why

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/rights"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/refused"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// NotInForce is protection asked for the target that is not in force: the
// liens that name it but have not marked it, and the rights teardown's
// controller lacks on it for the owner links it carries or the deletion
// policy it has.
type NotInForce struct {
	Liens []NamingLien
	// ControllerUser is the controller's service account the rights were
	// asked for ("" when none could be asked: no Trust, or no right to
	// ask).
	ControllerUser string
	// Missing are the rights the controller lacks on the target.
	Missing []refused.Request
}

// NamingLien is a lien whose spec names the target, which does not carry
// the lien's entry.
type NamingLien struct {
	// Name is the lien as its entries name it: ns/name or name.
	Name      string
	Kind      string
	Namespace string
	LienName  string
	Mode      string
	Reason    string
	// Ready is the lien's Ready condition, nil before the controller saw it.
	Ready *metav1.Condition
}

var (
	liensGVR        = v1alpha1.GroupVersion.WithResource("liens")
	clusterLiensGVR = v1alpha1.GroupVersion.WithResource("clusterliens")
	trustsGVR       = v1alpha1.GroupVersion.WithResource("trusts")
)

// gatherNotInForce reads the liens that may name the target and asks
// kube-apiserver (SubjectAccessReview) what the controller may do to it.
// What cannot be read is left out: why works without teardown installed.
func gatherNotInForce(ctx context.Context, c *resource.Clients, f *Facts) NotInForce {
	var n NotInForce
	gk := f.Target.Mapping.GroupVersionKind.GroupKind()
	obj := f.Object
	carried := map[string]bool{}
	for _, l := range doctor.LiensOf(obj.GetLabels(), obj.GetAnnotations(), obj.GetFinalizers()) {
		carried[l.Name] = true
	}
	var found []NamingLien
	if obj.GetNamespace() != "" {
		if list, err := c.Dynamic.Resource(liensGVR).Namespace(obj.GetNamespace()).List(ctx, metav1.ListOptions{}); err == nil {
			for _, u := range list.Items {
				var l v1alpha1.Lien
				if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l) != nil {
					continue
				}
				entries := make([]v1alpha1.ClusterLienTarget, 0, len(l.Spec.Protect))
				for _, p := range l.Spec.Protect {
					entries = append(entries, v1alpha1.ClusterLienTarget{APIVersion: p.APIVersion, Kind: p.Kind, Namespace: l.Namespace, Name: p.Name, Selector: p.Selector})
				}
				if namedBy(entries, gk, obj) {
					found = append(found, NamingLien{Name: l.Namespace + "/" + l.Name, Kind: "Lien", Namespace: l.Namespace, LienName: l.Name,
						Mode: string(l.Spec.Mode), Reason: l.Spec.Reason, Ready: apimeta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady)})
				}
			}
		}
	}
	if list, err := c.Dynamic.Resource(clusterLiensGVR).List(ctx, metav1.ListOptions{}); err == nil {
		for _, u := range list.Items {
			var l v1alpha1.ClusterLien
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l) == nil && namedBy(l.Spec.Protect, gk, obj) {
				found = append(found, NamingLien{Name: l.Name, Kind: "ClusterLien", LienName: l.Name,
					Mode: string(l.Spec.Mode), Reason: l.Spec.Reason, Ready: apimeta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady)})
			}
		}
	}
	for _, l := range found {
		if !carried[l.Name] {
			n.Liens = append(n.Liens, l)
		}
	}

	var asks []refused.Request
	gr := f.Target.Mapping.Resource.GroupResource()
	if len(doctor.OwnersOf(obj)) > 0 || len(boundRules(f.RuleOwners)) > 0 {
		asks = append(asks, refused.Request{Verb: "delete", Resource: gr, Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
	if _, ok := obj.GetLabels()[dependents.PolicyLabel]; ok {
		asks = append(asks, refused.Request{Verb: "patch", Resource: gr, Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
	if len(asks) == 0 {
		return n
	}
	ns, name, ok := controllerServiceAccount(ctx, c)
	if !ok {
		return n
	}
	user := "system:serviceaccount:" + ns + ":" + name
	for _, req := range asks {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: req.Verb, Group: req.Resource.Group, Resource: req.Resource.Resource, Namespace: req.Namespace, Name: req.Name,
			},
		}}
		got, err := c.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return n
		}
		n.ControllerUser = user
		if !got.Status.Allowed {
			n.Missing = append(n.Missing, req)
		}
	}
	return n
}

// controllerServiceAccount is the first service account among the
// controller users of the Trust teardown, as teardown-grants-warn reads it.
func controllerServiceAccount(ctx context.Context, c *resource.Clients) (ns, name string, ok bool) {
	u, err := c.Dynamic.Resource(trustsGVR).Get(ctx, v1alpha1.TrustName, metav1.GetOptions{})
	if err != nil {
		return "", "", false
	}
	users, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "controllerUsers")
	for _, user := range users {
		if parts := strings.Split(user, ":"); len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" {
			return parts[2], parts[3], true
		}
	}
	return "", "", false
}

// namedBy reports whether a protect entry (a Lien's with its namespace
// filled in) names obj, of kind gk: by name, or by selector, as a plan's
// keepUntilDone does.
func namedBy(entries []v1alpha1.ClusterLienTarget, gk schema.GroupKind, obj *unstructured.Unstructured) bool {
	return teardown.Keeps(entries, gk.WithVersion(""), obj) >= 0
}

// notInForceFindings says, for each lien, owner link or plan that asks to
// protect or collect the target but cannot, which one, why not, and the
// grant that fixes it. They hold nothing: they are the protection that is
// missing.
func notInForceFindings(f *Facts) []Finding {
	var out []Finding
	for _, l := range f.NotInForce.Liens {
		fd := Finding{Kind: "NotInForce", Title: fmt.Sprintf("%s %s names it but does not protect it: a deletion is not held by it", l.Kind, l.Name)}
		fd.Facts = []Fact{{"lien", fmt.Sprintf("%s (%s): %s", l.Name, orDefault(l.Mode, string(v1alpha1.LienModeDeny)), l.Reason)}}
		switch {
		case l.Ready == nil:
			fd.Facts = append(fd.Facts, Fact{"why not", "teardown's controller has not handled the lien yet: is it running?"})
		case l.Ready.Status != metav1.ConditionTrue:
			fd.Facts = append(fd.Facts, Fact{"why not", fmt.Sprintf("Ready=%s, %s: %s", l.Ready.Status, l.Ready.Reason, l.Ready.Message)})
		default:
			fd.Facts = append(fd.Facts, Fact{"why not", "the lien is Ready but has not marked it yet: look again in a moment"})
		}
		if l.Ready != nil && l.Ready.Reason == v1alpha1.ReasonMissingPermission {
			fd.Advice = append(fd.Advice, "grant the right the message names, with a ClusterRole labelled "+v1alpha1.AggregateToControllerLabel+"=true (teardown install --grant RESOURCE writes one): the lien protects it within seconds, nothing else to do")
		}
		fd.Advice = append(fd.Advice, describeCommand(l))
		out = append(out, fd)
	}
	gk := f.Target.Mapping.GroupVersionKind.GroupKind()
	for _, p := range f.Plans {
		if !p.Trigger.Is(gk, f.Object.GetNamespace(), f.Object.GetName()) || !notArmed(p) {
			continue
		}
		fd := Finding{Kind: "NotInForce", Title: fmt.Sprintf("Teardown %s names it as its trigger but is not armed: deleting it now does not run the plan", p.Name)}
		fd.Facts = []Fact{{"why not", "Armed=False, " + p.Armed}}
		if strings.HasPrefix(p.Armed, v1alpha1.ReasonMissingPermission) {
			fd.Advice = append(fd.Advice, "grant the right the message names, with a ClusterRole labelled "+v1alpha1.AggregateToControllerLabel+"=true (teardown install --grant RESOURCE writes one): the plan arms within seconds, nothing else to do")
		}
		fd.Advice = append(fd.Advice, "kubectl describe teardown "+p.Name)
		out = append(out, fd)
	}
	for _, req := range f.NotInForce.Missing {
		fd := Finding{Kind: "NotInForce", Facts: []Fact{{"why not", rights.Missing(req)}}}
		switch {
		case req.Verb == "delete" && len(doctor.OwnersOf(f.Object)) == 0:
			fd.Title = fmt.Sprintf("the binding of %s is not in force: nothing deletes it with its owner", strings.Join(boundRules(f.RuleOwners), ", "))
		case req.Verb == "delete":
			fd.Title = "its teardown.dev/owners links are not in force: nothing collects it when its owners are gone"
		default:
			fd.Title = "its " + dependents.PolicyLabel + " is not in force: teardown cannot hold the finalizer the policy needs"
		}
		fd.Facts = append(fd.Facts, Fact{"asked for", f.NotInForce.ControllerUser})
		group := ""
		if req.Resource.Group != "" {
			group = req.Resource.Group + "/"
		}
		flag := "--grant"
		if req.Verb == "delete" {
			flag = "--grant-delete"
		}
		fd.Advice = append(fd.Advice, fmt.Sprintf("teardown install %s %s%s (or a ClusterRole labelled %s=true granting it)", flag, group, req.Resource.Resource, v1alpha1.AggregateToControllerLabel))
		out = append(out, fd)
	}
	return out
}

// notArmed: the controller saw the plan and could not arm it.
func notArmed(p doctor.Plan) bool {
	return p.Armed != "" && (p.Phase == "" || p.Phase == string(v1alpha1.PhasePending))
}

func describeCommand(l NamingLien) string {
	if l.Kind == "Lien" {
		return fmt.Sprintf("kubectl describe lien %s -n %s", l.LienName, l.Namespace)
	}
	return "kubectl describe clusterlien " + l.LienName
}

// notInForceSummary is added to the verdict when protection was asked for
// and is not in force, so that "nothing holds" does not read as "safe".
func notInForceSummary(d Diagnosis) string {
	n := 0
	for _, fd := range d.Findings {
		if fd.Kind == "NotInForce" {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; protection asked for it is not in force (%d, below)", n)
}
