package doctor

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/heartbeat"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Setter is the field manager that wrote a finalizer, and how.
type Setter struct {
	Manager string `json:"manager,omitempty"`
	// Applied: written by server-side apply (a manifest), not by the
	// manager's own update.
	Applied bool `json:"applied,omitempty"`
}

// FinalizerManagers maps each finalizer to the field manager that owns it in
// managedFields: whoever added it. Finalizers under spec.finalizers (a
// namespace's "kubernetes") are included.
func FinalizerManagers(fields []metav1.ManagedFieldsEntry) map[string]Setter {
	out := map[string]Setter{}
	for _, e := range fields {
		if e.FieldsV1 == nil {
			continue
		}
		var tree map[string]map[string]map[string]json.RawMessage
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &tree); err != nil {
			continue
		}
		for _, top := range []string{"f:metadata", "f:spec"} {
			for key := range tree[top]["f:finalizers"] {
				v, ok := strings.CutPrefix(key, "v:")
				if !ok {
					continue
				}
				var name string
				if json.Unmarshal([]byte(v), &name) == nil {
					out[name] = Setter{Manager: e.Manager, Applied: e.Operation == metav1.ManagedFieldsOperationApply}
				}
			}
		}
	}
	return out
}

// manifestTools are the field managers of people and deployment tools: a
// finalizer they wrote came from a manifest, and they never remove it.
// applied tools are controllers too: only what they write by server-side
// apply comes from a manifest.
var manifestTools = []struct {
	prefix, tool string
	applied      bool
}{
	{"kubectl", "kubectl", false},
	{"helm", "Helm", false},
	{"Go-http-client", "Helm 3 before 3.13 (Go-http-client)", false},
	{"k9s", "k9s", false},
	{"terraform", "Terraform", false},
	{"pulumi", "Pulumi", false},
	{"kapp", "kapp", false},
	{"argocd", "Argo CD", true},
	{"kustomize-controller", "Flux", true},
	{"helm-controller", "Flux", true},
	{"fleet", "Rancher's fleet", true},
}

// ManifestTool names the person's tool or deployment tool that wrote a
// finalizer, or "" when s looks like a controller's own update.
func (s Setter) ManifestTool() string {
	for _, t := range manifestTools {
		if strings.HasPrefix(s.Manager, t.prefix) && (s.Applied || !t.applied) {
			return t.tool
		}
	}
	return ""
}

// Describe says who wrote it, for people.
func (s Setter) Describe() string {
	switch {
	case s.Manager == "":
		return "unknown (not in managedFields)"
	case s.ManifestTool() != "":
		return fmt.Sprintf("%s, from a manifest or by hand (field manager %s): not the controller that removes it", s.ManifestTool(), s.Manager)
	case s.Applied:
		return s.Manager + " (server-side apply)"
	}
	return s.Manager
}

// State is whether a finalizer's remover appears to run.
type State string

// States of a remover.
const (
	Running State = "running"
	// NotRunning: the remover is installed (a workload or lease of it is
	// found) but nothing of it is ready.
	NotRunning State = "not running"
	// Gone: the remover is known and nothing of it is found in the cluster.
	Gone    State = "not found"
	Unknown State = "unknown"
)

// Verdict is who removes a finalizer and whether it appears to run.
type Verdict struct {
	Finalizer string `json:"finalizer"`
	// SetBy is who wrote it (from managedFields).
	SetBy Setter `json:"setBy"`
	// Remover is what should remove it ("unknown" when nothing says).
	Remover string `json:"remover"`
	// When says what the remover waits for before removing it.
	When     string `json:"when,omitempty"`
	State    State  `json:"state"`
	Evidence string `json:"evidence"`
	// Kubernetes: one of Kubernetes' own finalizers, never removed by hand.
	Kubernetes bool `json:"kubernetes,omitempty"`
	// Source documents the remover, for finalizers of the known table.
	Source string `json:"source,omitempty"`
	// Workload is the remover's workload, when one was found.
	Workload *Workload `json:"workload,omitempty"`
	// Domain is the finalizer's domain (before "/"), if it has one.
	Domain string `json:"domain,omitempty"`
}

// Stuck means nothing found will remove the finalizer.
func (v Verdict) Stuck() bool { return v.State == NotRunning || v.State == Gone }

// Unremoved means no running controller is known to remove the finalizer:
// its remover is gone, not running, or unknown.
func (v Verdict) Unremoved() bool { return v.Stuck() || v.Remover == "unknown" }

// Says is the verdict in a few words, for a one-line report.
func (v Verdict) Says() string {
	switch {
	case v.State == Gone:
		return "nobody will remove it"
	case v.State == NotRunning:
		return v.Remover + ", which removes it, is not running"
	case v.Remover == "unknown":
		return "who removes it is unknown"
	}
	return "waiting for " + v.Remover
}

// Workload is a Deployment, StatefulSet, DaemonSet or bare Pod that may run
// a controller.
type Workload struct {
	// Kind is deployment, statefulset, daemonset or pod.
	Kind            string `json:"kind"`
	Namespace, Name string
	// Programs are its containers' names and the base names of their commands.
	Programs       []string `json:"-"`
	Ready, Desired int32
}

// Ref is kind/name -n namespace, as kubectl takes it.
func (w Workload) Ref() string { return w.Kind + "/" + w.Name + " -n " + w.Namespace }

func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s: %d/%d ready", w.Kind, w.Namespace, w.Name, w.Ready, w.Desired)
}

// Lease is a leader-election lease, or teardown's heartbeat.
type Lease struct {
	Namespace, Name, Holder string
	// Fresh means renewed within its duration when gathered.
	Fresh bool
}

func (l Lease) String() string { return l.Namespace + "/" + l.Name }

// Controllers are the facts that show what runs in (or against) the cluster.
type Controllers struct {
	Workloads []Workload
	// Leases are the leases other than teardown's heartbeats.
	Leases []Lease
	// Heartbeats are the Leases labelled as teardown's controller's
	// heartbeat (package heartbeat), in whatever namespace they are.
	Heartbeats []Lease
	// TeardownNamespaces are where a heartbeat is believed: teardown's
	// namespace and those of the service accounts the Trust names as
	// controllers, where tenants do not write. A heartbeat elsewhere could
	// be anyone's.
	TeardownNamespaces []string
	// TrustRead: the Trust could be read, so TeardownNamespaces are all of
	// teardown's namespaces.
	TrustRead bool
	// Unlisted are the kinds of workload the user may not list: a remover
	// not found among the others may run there.
	Unlisted []string
}

// Known is one entry of the known-finalizer table.
type Known struct {
	Name      string   `json:"name,omitempty"`
	Prefix    string   `json:"prefix,omitempty"`
	Domain    string   `json:"domain,omitempty"`
	Remover   string   `json:"remover"`
	Component string   `json:"component,omitempty"`
	Workloads []string `json:"workloads,omitempty"`
	When      string   `json:"when,omitempty"`
	Source    string   `json:"source,omitempty"`
}

//go:embed known_finalizers.yaml
var knownFinalizersYAML []byte

// KnownFinalizers is the table of finalizers whose remover is known
// (known_finalizers.yaml), then teardown's own.
var KnownFinalizers = func() []Known {
	var out []Known
	if err := yaml.UnmarshalStrict(knownFinalizersYAML, &out); err != nil {
		panic("known_finalizers.yaml: " + err.Error())
	}
	return append(out,
		Known{Name: lien.Finalizer, Remover: "the teardown controller", Component: "teardown", When: "once the lien is released"},
		Known{Name: dependents.Finalizer, Remover: "the teardown controller", Component: "teardown", When: "once the dependents are deleted or orphaned as the deletion policy says"},
		Known{Name: v1alpha1.TeardownFinalizer, Remover: "the teardown controller", Component: "teardown", When: "once the Teardown plan has finished"},
		Known{Name: v1alpha1.LienCleanupFinalizer, Remover: "the teardown controller", Component: "teardown", When: "once the lien's markers are off the objects it protected"},
	)
}()

// domainOf is the finalizer's domain: what comes before "/", if anything does.
func domainOf(finalizer string) string {
	d, _, ok := strings.Cut(finalizer, "/")
	if !ok {
		return ""
	}
	return d
}

// knownFinalizer looks finalizer up in KnownFinalizers, and knows each
// plan's own finalizer on a trigger.
func knownFinalizer(finalizer string) (Known, bool) {
	domain := domainOf(finalizer)
	if domain == "" {
		domain = finalizer // "longhorn.io": a finalizer that is a domain
	}
	for _, pass := range []func(Known) bool{
		func(k Known) bool { return k.Name != "" && k.Name == finalizer },
		func(k Known) bool { return k.Prefix != "" && strings.HasPrefix(finalizer, k.Prefix) },
		func(k Known) bool {
			return k.Domain != "" && (domain == k.Domain || strings.HasSuffix(domain, "."+k.Domain))
		},
	} {
		for _, k := range KnownFinalizers {
			if pass(k) {
				return k, true
			}
		}
	}
	if strings.HasPrefix(finalizer, v1alpha1.TriggerFinalizerPrefix) {
		return Known{Remover: "the teardown controller (or the operator, for a plan it runs with runner.SelfUninstall)", Component: "teardown",
			When: "once the plan " + strings.TrimPrefix(finalizer, v1alpha1.TriggerFinalizerPrefix) + " has finished"}, true
	}
	return Known{}, false
}

// KubernetesOwned reports whether Kubernetes itself removes finalizer once
// what it waits for is done (kubernetes, foregroundDeletion, orphan,
// kubernetes.io/*, *.kubernetes.io/*, *.k8s.io/*). Such a finalizer is never
// to be removed by hand.
func KubernetesOwned(finalizer string) bool {
	k, ok := knownFinalizer(finalizer)
	return ok && isKubernetesComponent(k.Component)
}

func isKubernetesComponent(c string) bool {
	return c == "kube-apiserver" || c == "kube-controller-manager" || c == "cloud-controller-manager"
}

// Explain says who removes finalizer (written by setter) and whether it
// appears to run.
func (c *Controllers) Explain(finalizer string, setter Setter) Verdict {
	domain := domainOf(finalizer)
	v := Verdict{Finalizer: finalizer, SetBy: setter, Domain: domain}
	if k, ok := knownFinalizer(finalizer); ok {
		v.Remover, v.When, v.Source = k.Remover, k.When, k.Source
		switch k.Component {
		case "kube-apiserver":
			v.Kubernetes = true
			v.State, v.Evidence = Running, "kube-apiserver answers"
		case "kube-controller-manager", "cloud-controller-manager":
			v.Kubernetes = true
			v.State, v.Evidence = c.leaseState("kube-system", k.Component)
		case "teardown":
			v.State, v.Evidence, v.Workload = c.teardownState()
		default:
			programs := k.Workloads
			if setter.Manager != "" && setter.ManifestTool() == "" {
				programs = append(slices.Clone(programs), setter.Manager)
			}
			v.State, v.Evidence, v.Workload = c.find(programs, domain)
			if v.State == Gone && len(programs) == 0 {
				v.State = Unknown
			}
		}
		return v
	}
	switch tool := setter.ManifestTool(); {
	case setter.Manager == "" || tool != "":
		// Nothing says which controller honours it: look for one of its domain.
		v.Remover = "unknown"
		if tool != "" {
			v.Evidence = fmt.Sprintf("%s wrote it from a manifest or by hand, so managedFields do not say which controller removes it", tool)
		} else {
			v.Evidence = "managedFields do not say who added it"
		}
		if domain == "" {
			v.State = Unknown
			v.Evidence += "; it has no domain to look for a controller by"
			return v
		}
		state, evidence, w := c.find(nil, domain)
		if state == Gone {
			v.State = Unknown
			v.Evidence += "; " + evidence
			return v
		}
		v.Remover = "the controller of " + domain
		v.State, v.Evidence, v.Workload = state, evidence, w
	default:
		v.Remover = setter.Manager
		v.State, v.Evidence, v.Workload = c.find([]string{setter.Manager}, domain)
		if v.State == Gone && setter.Applied {
			// A controller that applies its own finalizers is as likely as a
			// tool under another name: not found is not gone.
			v.State = Unknown
			v.Evidence = "written by server-side apply as " + setter.Manager + ", which may be a deployment tool; " + v.Evidence
		}
	}
	return v
}

func (c *Controllers) leaseState(ns, name string) (State, string) {
	for _, l := range c.Leases {
		if l.Namespace == ns && l.Name == name {
			if l.Fresh {
				return Running, fmt.Sprintf("leader lease %s/%s renewed by %s", ns, name, l.Holder)
			}
			return NotRunning, fmt.Sprintf("leader lease %s/%s expired (last holder %s)", ns, name, l.Holder)
		}
	}
	return Unknown, fmt.Sprintf("part of the control plane; no leader lease %s/%s to check (leader election off?)", ns, name)
}

// teardownState is whether teardown's controller runs: its heartbeat
// Lease, renewed with leader election on or off, in a namespace of
// teardown's; else its workload or leader Lease, as for any controller. A
// fresh heartbeat only in a namespace that is not teardown's is not
// believed, and makes the answer unknown, never running.
//
// Once the Trust was read, its workloads and leader Leases count only in
// teardown's namespaces too: one elsewhere that runs makes the answer
// unknown. Without the Trust, the chart's namespace is not known, and
// they count anywhere.
func (c *Controllers) teardownState() (State, string, *Workload) {
	programs, domain := []string{"teardown", "teardown-controller"}, "teardown.dev"
	ours := c
	if c.TrustRead {
		ours = &Controllers{Unlisted: c.Unlisted}
		for _, w := range c.Workloads {
			if slices.Contains(c.TeardownNamespaces, w.Namespace) {
				ours.Workloads = append(ours.Workloads, w)
			}
		}
		for _, l := range c.Leases {
			if slices.Contains(c.TeardownNamespaces, l.Namespace) {
				ours.Leases = append(ours.Leases, l)
			}
		}
	}
	state, evidence, w := ours.find(programs, domain)
	var expired, foreign []string
	if ours != c && state != Running {
		if s, e, _ := c.find(programs, domain); s == Running {
			foreign = append(foreign, e+", outside teardown's namespaces ("+strings.Join(c.TeardownNamespaces, ", ")+"): not believed")
		}
	}
	for _, l := range c.Heartbeats {
		switch {
		case !slices.Contains(c.TeardownNamespaces, l.Namespace):
			if l.Fresh {
				foreign = append(foreign, fmt.Sprintf("heartbeat Lease %s renewed by %s, but %s is not teardown's namespace (%s): anyone who may write Leases there could have written it",
					l, l.Holder, l.Namespace, strings.Join(c.TeardownNamespaces, ", ")))
			}
		case l.Fresh:
			return Running, fmt.Sprintf("heartbeat Lease %s renewed by %s", l, l.Holder), w
		case l.Holder == "":
			expired = append(expired, fmt.Sprintf("heartbeat Lease %s released: the controller stopped", l))
		default:
			expired = append(expired, fmt.Sprintf("heartbeat Lease %s expired (last renewed by %s)", l, l.Holder))
		}
	}
	switch {
	case state == Running:
		return state, evidence, w
	case len(expired) > 0:
		if state == NotRunning {
			expired = append(expired, evidence)
		}
		return NotRunning, strings.Join(expired, "; "), w
	case len(foreign) > 0 && state != NotRunning:
		return Unknown, strings.Join(foreign, "; "), w
	case state == Gone:
		evidence += fmt.Sprintf(", and no heartbeat Lease %s in %s", heartbeat.LeaseName, strings.Join(c.TeardownNamespaces, " or "))
	}
	return state, evidence, w
}

// find looks for a workload running one of programs, or a leader lease
// named after a program or the finalizer's domain. It returns Gone when
// nothing is found.
func (c *Controllers) find(programs []string, domain string) (State, string, *Workload) {
	var notReady []string
	var first *Workload
	for i, w := range c.Workloads {
		if !matchesProgram(w, programs) {
			continue
		}
		if w.Ready > 0 {
			return Running, w.String(), &c.Workloads[i]
		}
		if first == nil {
			first = &c.Workloads[i]
		}
		notReady = append(notReady, w.String())
	}
	var stale []string
	for _, l := range c.Leases {
		if !matchesLease(l, programs, domain) {
			continue
		}
		if l.Fresh {
			return Running, fmt.Sprintf("leader lease %s/%s renewed by %s", l.Namespace, l.Name, l.Holder), nil
		}
		stale = append(stale, fmt.Sprintf("leader lease %s/%s expired", l.Namespace, l.Name))
	}
	if found := append(notReady, stale...); len(found) > 0 {
		sort.Strings(found)
		return NotRunning, strings.Join(found, "; "), first
	}
	var names []string
	for _, p := range programs {
		if q := fmt.Sprintf("%q", p); !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	if domain != "" {
		names = append(names, fmt.Sprintf("%q", domain))
	}
	evidence := "no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching " + strings.Join(names, " or ") + " found"
	if len(c.Unlisted) > 0 {
		return Unknown, evidence + " (you may not list " + strings.Join(c.Unlisted, ", ") + ": it may run there)", nil
	}
	return Gone, evidence, nil
}

func matchesProgram(w Workload, programs []string) bool {
	for _, p := range programs {
		if w.Name == p || slices.Contains(w.Programs, p) {
			return true
		}
	}
	return false
}

func matchesLease(l Lease, programs []string, domain string) bool {
	for _, p := range programs {
		if l.Name == p || strings.HasPrefix(l.Holder, p+"-") || strings.HasPrefix(l.Holder, p+"_") {
			return true
		}
	}
	return domain != "" && (l.Name == domain || strings.HasSuffix(l.Name, "."+domain))
}

// ProgramNames are the names a container runs under: its name and the base
// name of its command.
func ProgramNames(name string, command []string) []string {
	out := []string{name}
	if len(command) > 0 {
		out = append(out, path.Base(command[0]))
	}
	return out
}
