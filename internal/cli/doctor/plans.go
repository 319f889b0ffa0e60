package doctor

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// Plan is what one Teardown says, for `why` and `plan`: what deleting its
// trigger runs, and what the plan keeps meanwhile.
type Plan struct {
	Name string
	// Phase is Pending (armed), Running, Succeeded or Failed; "" before the
	// controller has seen the plan.
	Phase       string
	CurrentStep string
	Steps       []string
	// Trigger is the object whose deletion runs the plan; nil for a plan
	// without one.
	Trigger *PlanObject
	// Armed is the Armed condition's reason and message.
	Armed string
	// KeepLien is the ClusterLien that keeps the keepUntilDone objects.
	KeepLien string
	// Kept are those objects as the lien found them ([ns/]kind[.group]/name),
	// or the plan's keepUntilDone entries before it has.
	Kept []string
}

// PlanObject is one object a plan names.
type PlanObject struct {
	GroupKind schema.GroupKind
	Namespace string
	Name      string
}

// Is reports whether the object is gk ns/name.
func (o *PlanObject) Is(gk schema.GroupKind, ns, name string) bool {
	return o != nil && o.GroupKind == gk && o.Namespace == ns && o.Name == name
}

// Ref is the object as `why` and `plan` name objects.
func (o *PlanObject) Ref() string { return objectRef(o.GroupKind, o.Namespace, o.Name) }

// Finished reports whether the plan has run to its end.
func (p Plan) Finished() bool { return p.Phase == string(v1alpha1.PhaseSucceeded) }

// State is the phase and step for a person: "running step delete-work (2 of 3)".
func (p Plan) State() string {
	step := ""
	for i, s := range p.Steps {
		if s == p.CurrentStep {
			step = fmt.Sprintf(" %s (%d of %d)", s, i+1, len(p.Steps))
		}
	}
	switch v1alpha1.TeardownPhase(p.Phase) {
	case v1alpha1.PhaseRunning:
		return "running step" + step
	case v1alpha1.PhaseFailed:
		return "failed at step" + step
	case v1alpha1.PhaseSucceeded:
		return "finished"
	case v1alpha1.PhasePending:
		return "armed, waiting for its trigger's deletion"
	}
	if p.Armed != "" {
		return "not armed: " + p.Armed
	}
	return "not seen by the teardown controller yet"
}

var teardownsGVR = v1alpha1.GroupVersion.WithResource("teardowns")

// GatherPlans reads every Teardown and the ClusterLien that keeps its
// keepUntilDone objects. None when the API is not installed or may not be
// read: the other findings stand without them.
func GatherPlans(ctx context.Context, dyn dynamic.Interface) []Plan {
	list, err := dyn.Resource(teardownsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	kept := keepLiens(ctx, dyn)
	var out []Plan
	for _, u := range list.Items {
		td := &v1alpha1.Teardown{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, td) != nil {
			continue
		}
		p := Plan{Name: td.Name, Phase: string(td.Status.Phase), CurrentStep: td.Status.CurrentStep}
		for _, s := range td.Spec.Steps {
			p.Steps = append(p.Steps, s.Name)
		}
		if t := td.Spec.Trigger; t != nil {
			p.Trigger = &PlanObject{GroupKind: groupKind(t.APIVersion, t.Kind), Namespace: t.Namespace, Name: t.Name}
		}
		if c := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionArmed); c != nil && c.Status != metav1.ConditionTrue {
			p.Armed = c.Reason + ": " + c.Message
		}
		if len(td.Spec.KeepUntilDone) > 0 {
			p.KeepLien = teardown.KeepName(td.Name)
			p.Kept = keptBy(kept[p.KeepLien], td.Spec.KeepUntilDone)
		}
		out = append(out, p)
	}
	return out
}

// keepLiens reads the ClusterLiens that keep plans' keepUntilDone objects
// (labelled with their Teardown), by name.
func keepLiens(ctx context.Context, dyn dynamic.Interface) map[string]*v1alpha1.ClusterLien {
	out := map[string]*v1alpha1.ClusterLien{}
	list, err := dyn.Resource(clusterLiensGVR).List(ctx, metav1.ListOptions{LabelSelector: teardown.KeepLabel})
	if err != nil {
		return out
	}
	for _, u := range list.Items {
		l := &v1alpha1.ClusterLien{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l) == nil {
			out[l.Name] = l
		}
	}
	return out
}

// keptBy lists what the plan's lien found, or its keepUntilDone entries
// while the lien has not reported yet.
func keptBy(l *v1alpha1.ClusterLien, keep []v1alpha1.ClusterLienTarget) []string {
	var kept []string
	if l != nil {
		for _, o := range l.Status.Protected {
			kept = append(kept, objectRef(groupKind(o.APIVersion, o.Kind), o.Namespace, o.Name))
		}
	}
	if len(kept) > 0 {
		return kept
	}
	for _, e := range keep {
		name := e.Name
		if name == "" {
			name = "(selector)"
		}
		kept = append(kept, objectRef(groupKind(e.APIVersion, e.Kind), e.Namespace, name))
	}
	return kept
}

func groupKind(apiVersion, kind string) schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return schema.GroupKind{Group: gv.Group, Kind: kind}
}

// objectRef is [ns/]kind[.group]/name, as resource.Object.Ref writes it.
func objectRef(gk schema.GroupKind, ns, name string) string {
	r := resource.KindRef(gk) + "/" + name
	if ns != "" {
		return ns + "/" + r
	}
	return r
}

// KeptBy returns the plans whose keepUntilDone lien is among liens.
func KeptBy(plans []Plan, liens []Lien) []Plan {
	var out []Plan
	for _, p := range plans {
		for _, l := range liens {
			if p.KeepLien != "" && l.Name == p.KeepLien {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// TriggeredBy returns the plans that deleting gk ns/name runs.
func TriggeredBy(plans []Plan, gk schema.GroupKind, ns, name string) []Plan {
	var out []Plan
	for _, p := range plans {
		if p.Trigger.Is(gk, ns, name) {
			out = append(out, p)
		}
	}
	return out
}
