package teardown

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

var stepName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate checks a plan as the CRD's admission rules do, so that
// `teardown run` refuses a bad plan before touching the cluster; each
// error names its field (spec.steps[1].timeout).
func Validate(spec *v1alpha1.TeardownSpec) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("spec")
	if t := spec.Trigger; t != nil {
		p := root.Child("trigger")
		for f, v := range map[string]string{"apiVersion": t.APIVersion, "kind": t.Kind, "name": t.Name} {
			if v == "" {
				errs = append(errs, field.Required(p.Child(f), ""))
			}
		}
	}
	for i, k := range spec.KeepUntilDone {
		p := root.Child("keepUntilDone").Index(i)
		if k.APIVersion == "" || k.Kind == "" {
			errs = append(errs, field.Required(p, "set apiVersion and kind"))
		}
		if (k.Name == "") == (k.Selector == nil) {
			errs = append(errs, field.Invalid(p, k.Name, "set exactly one of name and selector"))
		}
		if group(k.APIVersion) == v1alpha1.GroupVersion.Group {
			errs = append(errs, field.Invalid(p.Child("apiVersion"), k.APIVersion, "a kept object is held by a Deny lien, and a lien may not protect teardown.dev kinds (a lien on a lien or a Teardown could hold itself for ever): delete teardown.dev objects in a step instead"))
		}
		if t := spec.Trigger; t != nil && k.Name != "" && k.Name == t.Name && k.Kind == t.Kind && k.Namespace == t.Namespace && group(k.APIVersion) == group(t.APIVersion) {
			errs = append(errs, field.Invalid(p, k.Name, "keeps the trigger: a kept object's DELETE is refused until the plan finishes, so the plan could never start; the plan holds its trigger by a finalizer already"))
		}
	}
	if len(spec.Steps) == 0 {
		errs = append(errs, field.Required(root.Child("steps"), "a plan needs at least one step"))
	}
	seen := map[string]bool{}
	for i, s := range spec.Steps {
		p := root.Child("steps").Index(i)
		if !stepName.MatchString(s.Name) || len(s.Name) > 63 {
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, "a step name is a DNS label: lower case letters, digits and '-'"))
		}
		if seen[s.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), s.Name))
		}
		seen[s.Name] = true
		n := 0
		for _, set := range []bool{s.Delete != nil, s.InhibitWebhooks != nil, s.WaitFor != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(p, s.Name, "set exactly one action: delete, inhibitWebhooks or waitFor"))
		}
		if s.Timeout != nil && (s.Timeout.Duration < time.Second || s.Timeout.Duration > 24*time.Hour) {
			errs = append(errs, field.Invalid(p.Child("timeout"), s.Timeout.Duration.String(), "timeout must be between 1s and 24h"))
		}
		switch s.OnTimeout {
		case "", v1alpha1.OnTimeoutFail, v1alpha1.OnTimeoutContinue:
		default:
			errs = append(errs, field.NotSupported(p.Child("onTimeout"), s.OnTimeout, []string{"Fail", "Continue"}))
		}
		if d := s.Delete; d != nil {
			dp := p.Child("delete")
			if (d.Kind == "") != (d.APIVersion == "") {
				errs = append(errs, field.Invalid(dp, d.Kind, "set apiVersion and kind together"))
			}
			if (d.Kind == "") == (len(d.Kinds) == 0) {
				errs = append(errs, field.Invalid(dp, d.Kind, "set exactly one of kind (with apiVersion) and kinds"))
			}
			for j, k := range d.Kinds {
				if k.APIVersion == "" || k.Kind == "" {
					errs = append(errs, field.Required(dp.Child("kinds").Index(j), "set apiVersion and kind"))
				}
			}
			errs = append(errs, validateSelection(dp, d.Selection)...)
			if d.Name != "" && d.AllNamespaces {
				errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "name needs a namespace, not allNamespaces: use a selector to match in every namespace"))
			}
			switch d.PropagationPolicy {
			case "", v1alpha1.PropagationBackground, v1alpha1.PropagationForeground, v1alpha1.PropagationOrphan:
			default:
				errs = append(errs, field.NotSupported(dp.Child("propagationPolicy"), d.PropagationPolicy, []string{"Background", "Foreground", "Orphan"}))
			}
		}
		if w := s.InhibitWebhooks; w != nil {
			wp := p.Child("inhibitWebhooks")
			if len(w.Names) == 0 {
				errs = append(errs, field.Required(wp.Child("names"), "name at least one webhook configuration"))
			}
			switch w.Action {
			case "", v1alpha1.WebhookIgnore, v1alpha1.WebhookDelete:
			default:
				errs = append(errs, field.NotSupported(wp.Child("action"), w.Action, []string{"Ignore", "Delete"}))
			}
		}
		if w := s.WaitFor; w != nil {
			wp := p.Child("waitFor")
			if w.APIVersion == "" || w.Kind == "" {
				errs = append(errs, field.Required(wp, "set apiVersion and kind"))
			}
			errs = append(errs, validateSelection(wp, w.Selection)...)
			if c := w.Condition; c != nil {
				if c.Type == "" {
					errs = append(errs, field.Required(wp.Child("condition", "type"), ""))
				}
				switch c.Status {
				case "", metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
				default:
					errs = append(errs, field.NotSupported(wp.Child("condition", "status"), c.Status, []string{"True", "False", "Unknown"}))
				}
			}
		}
		if g := s.IfRemoverGone; g != nil {
			errs = append(errs, validateIfRemoverGone(p.Child("ifRemoverGone"), s, g)...)
		}
	}
	return errs
}

// validateIfRemoverGone is the CRD's rules on ifRemoverGone: a step that
// waits for finalizers, a remover named, 1 to 8 finalizers none of which
// Kubernetes or teardown owns, after between 10s and 24h.
func validateIfRemoverGone(p *field.Path, s v1alpha1.TeardownStep, g *v1alpha1.IfRemoverGone) field.ErrorList {
	var errs field.ErrorList
	if s.Delete == nil && (s.WaitFor == nil || s.WaitFor.Condition != nil) {
		errs = append(errs, field.Invalid(p, "", "ifRemoverGone: only a delete step, or a waitFor step without a condition, waits for finalizers"))
	}
	for f, v := range map[string]string{"apiVersion": g.Remover.APIVersion, "kind": g.Remover.Kind, "name": g.Remover.Name} {
		if v == "" {
			errs = append(errs, field.Required(p.Child("remover", f), ""))
		}
	}
	switch n := len(g.Finalizers); {
	case n == 0:
		errs = append(errs, field.Required(p.Child("finalizers"), "name the finalizers to remove"))
	case n > 8:
		errs = append(errs, field.TooMany(p.Child("finalizers"), n, 8))
	}
	for i, f := range g.Finalizers {
		if KubernetesOwned(f) || strings.HasPrefix(f, v1alpha1.KeyPrefix) {
			errs = append(errs, field.Invalid(p.Child("finalizers").Index(i), f, "Kubernetes' own finalizers (kubernetes, orphan, foregroundDeletion, *kubernetes.io/*, *k8s.io/*, *.k8s.io) and teardown's (teardown.dev/*) are never removed: their remover is Kubernetes, or teardown itself"))
		}
	}
	if g.After != nil && (g.After.Duration < 10*time.Second || g.After.Duration > 24*time.Hour) {
		errs = append(errs, field.Invalid(p.Child("after"), g.After.Duration.String(), "after must be between 10s and 24h"))
	}
	return errs
}

// KubernetesOwned reports whether Kubernetes owns the finalizer f (its
// remover is a Kubernetes component): kubernetes, orphan,
// foregroundDeletion, any containing kubernetes.io/ or k8s.io/, and any
// ending in .k8s.io (customresourcecleanup.apiextensions.k8s.io).
func KubernetesOwned(f string) bool {
	switch f {
	case "kubernetes", metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		return true
	}
	return strings.Contains(f, "kubernetes.io/") || strings.Contains(f, "k8s.io/") || strings.HasSuffix(f, ".k8s.io")
}

func validateSelection(p *field.Path, s v1alpha1.Selection) field.ErrorList {
	var errs field.ErrorList
	if (s.Name == "") == (s.Selector == nil) {
		errs = append(errs, field.Invalid(p, s.Name, "set exactly one of name and selector"))
	}
	if s.AllNamespaces && s.Namespace != "" {
		errs = append(errs, field.Invalid(p.Child("namespace"), s.Namespace, "set at most one of namespace and allNamespaces"))
	}
	if s.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.Selector); err != nil {
			errs = append(errs, field.Invalid(p.Child("selector"), s.Selector, err.Error()))
		}
	}
	return errs
}

// Kinds are the kinds a step selects: a delete's kind or kinds, a waitFor's
// kind, or both webhook configuration kinds for inhibitWebhooks.
func Kinds(step v1alpha1.TeardownStep) []v1alpha1.Kind {
	switch {
	case step.InhibitWebhooks != nil:
		return []v1alpha1.Kind{
			{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
			{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		}
	case step.Delete != nil && len(step.Delete.Kinds) > 0:
		return step.Delete.Kinds
	case step.Delete != nil:
		return []v1alpha1.Kind{{APIVersion: step.Delete.APIVersion, Kind: step.Delete.Kind}}
	case step.WaitFor != nil:
		return []v1alpha1.Kind{{APIVersion: step.WaitFor.APIVersion, Kind: step.WaitFor.Kind}}
	}
	return nil
}

// Selection is a step's selection (for inhibitWebhooks, its names are
// matched by the caller).
func Selection(step v1alpha1.TeardownStep) v1alpha1.Selection {
	switch {
	case step.Delete != nil:
		return step.Delete.Selection
	case step.WaitFor != nil:
		return step.WaitFor.Selection
	}
	return v1alpha1.Selection{}
}

// Describe says in a few words what a step does, for progress lines.
func Describe(step v1alpha1.TeardownStep) string {
	where := func(s v1alpha1.Selection) string {
		out := ""
		switch {
		case s.Name != "":
			out = " " + s.Name
		case s.Selector != nil:
			if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Empty() {
				out = " -l " + sel.String()
			}
		}
		switch {
		case s.AllNamespaces:
			out += " in all namespaces"
		case s.Namespace != "":
			out += " in " + s.Namespace
		}
		return out
	}
	switch {
	case step.InhibitWebhooks != nil:
		return fmt.Sprintf("inhibit webhooks %v (%s)", step.InhibitWebhooks.Names, orDefault(string(step.InhibitWebhooks.Action), "Ignore"))
	case step.Delete != nil:
		var kinds []string
		for _, k := range Kinds(step) {
			kinds = append(kinds, k.Kind)
		}
		return fmt.Sprintf("delete %v%s", kinds, where(step.Delete.Selection))
	case step.WaitFor != nil:
		if c := step.WaitFor.Condition; c != nil {
			return fmt.Sprintf("wait for %s%s %s=%s", step.WaitFor.Kind, where(step.WaitFor.Selection), c.Type, orDefault(string(c.Status), "True"))
		}
		return fmt.Sprintf("wait for %s%s to be gone", step.WaitFor.Kind, where(step.WaitFor.Selection))
	}
	return "nothing"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// group is the API group of an apiVersion ("" for the core group).
func group(apiVersion string) string {
	g, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return g
}
