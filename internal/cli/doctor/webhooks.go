package doctor

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Webhook is one admission webhook and the state of its service.
type Webhook struct {
	Configuration string `json:"configuration"`
	Name          string `json:"name"`
	Mutating      bool   `json:"mutating,omitempty"`
	FailClosed    bool   `json:"failClosed"`
	// Service is namespace/name; empty for a URL webhook (not checked).
	Service string `json:"service,omitempty"`
	// ServiceMissing: the Service does not exist.
	ServiceMissing bool `json:"serviceMissing,omitempty"`
	// ReadyEndpoints counts ready endpoints in the Service's EndpointSlices.
	ReadyEndpoints    int                              `json:"readyEndpoints"`
	Rules             []admissionv1.RuleWithOperations `json:"-"`
	NamespaceSelector *metav1.LabelSelector            `json:"-"`
	ObjectSelector    *metav1.LabelSelector            `json:"-"`
}

// Kind is how the webhook is named to a person.
func (w Webhook) Kind() string {
	if w.Mutating {
		return "mutatingwebhookconfiguration"
	}
	return "validatingwebhookconfiguration"
}

// Down means the webhook is fail-closed and nothing can answer it: every
// request it matches is refused.
func (w Webhook) Down() bool {
	return w.FailClosed && w.Service != "" && (w.ServiceMissing || w.ReadyEndpoints == 0)
}

// Why says why it cannot answer.
func (w Webhook) Why() string {
	if w.ServiceMissing {
		return fmt.Sprintf("service %s does not exist", w.Service)
	}
	return fmt.Sprintf("service %s has no ready endpoints", w.Service)
}

// Refuses says which requests the webhook matches, for people:
// "DELETE, UPDATE of configmaps, widgets.example.com".
func (w Webhook) Refuses() string {
	var parts []string
	for _, r := range w.Rules {
		ops := make([]string, 0, len(r.Operations))
		for _, o := range r.Operations {
			ops = append(ops, string(o))
		}
		var res []string
		for _, g := range r.APIGroups {
			for _, x := range r.Resources {
				switch {
				case x == "*" || x == "*/*":
					res = append(res, "every resource")
				case g == "" || g == "*":
					res = append(res, x)
				default:
					res = append(res, x+"."+g)
				}
			}
		}
		parts = append(parts, strings.Join(ops, ", ")+" of "+strings.Join(slices.Compact(res), ", "))
	}
	s := strings.Join(parts, "; ")
	if w.NamespaceSelector != nil && (len(w.NamespaceSelector.MatchLabels) > 0 || len(w.NamespaceSelector.MatchExpressions) > 0) {
		s += " (in the namespaces its namespaceSelector matches)"
	}
	return s
}

// Request is an admission request the doctor asks about.
type Request struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
	Operation  admissionv1.OperationType
	// NamespaceLabels are the labels of the object's namespace (of the
	// namespace itself for a Namespace).
	NamespaceLabels map[string]string
	ObjectLabels    map[string]string
}

// Matches reports whether the webhook is called for r. Versions match
// whatever the rule says, as matchPolicy Equivalent (the default) does.
func (w Webhook) Matches(r Request) bool {
	if !selects(w.ObjectSelector, r.ObjectLabels) {
		return false
	}
	if (r.Namespaced || r.GVR.Group == "" && r.GVR.Resource == "namespaces") && !selects(w.NamespaceSelector, r.NamespaceLabels) {
		return false
	}
	for _, rule := range w.Rules {
		if !slices.Contains(rule.Operations, r.Operation) && !slices.Contains(rule.Operations, admissionv1.OperationAll) {
			continue
		}
		if !containsOrStar(rule.APIGroups, r.GVR.Group) {
			continue
		}
		if !containsOrStar(rule.Resources, r.GVR.Resource) && !slices.Contains(rule.Resources, "*/*") {
			continue
		}
		if rule.Scope != nil {
			switch *rule.Scope {
			case admissionv1.ClusterScope:
				if r.Namespaced {
					continue
				}
			case admissionv1.NamespacedScope:
				if !r.Namespaced {
					continue
				}
			}
		}
		return true
	}
	return false
}

func containsOrStar(list []string, s string) bool {
	return slices.Contains(list, s) || slices.Contains(list, "*")
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return true // the server refuses bad selectors; assume it matches
	}
	return s.Matches(labels.Set(l))
}

// APIService is an aggregated API that is not available.
type APIService struct {
	Name    string `json:"name"`
	Service string `json:"service,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// GV is the group/version the APIService (version.group) serves.
func (a APIService) GV() string {
	version, group, _ := strings.Cut(a.Name, ".")
	return group + "/" + version
}
