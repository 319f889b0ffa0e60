package doctor

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// FinalizerManagers maps each finalizer to the field manager that owns it in
// managedFields: whoever added it. Finalizers under spec.finalizers (a
// namespace's "kubernetes") are included.
func FinalizerManagers(fields []metav1.ManagedFieldsEntry) map[string]string {
	out := map[string]string{}
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
					out[name] = e.Manager
				}
			}
		}
	}
	return out
}

// State is whether a finalizer's remover appears to run.
type State string

// States of a remover.
const (
	Running    State = "running"
	NotRunning State = "not running"
	Unknown    State = "unknown"
)

// Verdict is who removes a finalizer and whether it appears to run.
type Verdict struct {
	Finalizer string `json:"finalizer"`
	// Manager is the field manager that added it ("" when managedFields do not say).
	Manager string `json:"manager,omitempty"`
	// Remover is what should remove it.
	Remover string `json:"remover"`
	// When says what the remover waits for before removing it.
	When     string `json:"when,omitempty"`
	State    State  `json:"state"`
	Evidence string `json:"evidence"`
}

// Stuck means nothing found will remove the finalizer.
func (v Verdict) Stuck() bool { return v.State == NotRunning }

// Deployment is what the doctor needs to know of a Deployment.
type Deployment struct {
	Namespace, Name string
	// Programs are its containers' names and the base names of their commands.
	Programs       []string
	Ready, Desired int32
}

// Lease is a leader-election lease.
type Lease struct {
	Namespace, Name, Holder string
	// Fresh means renewed within its duration when gathered.
	Fresh bool
}

// Controllers are the facts that show what runs in (or against) the cluster.
type Controllers struct {
	Deployments []Deployment
	Leases      []Lease
}

type known struct {
	remover, component, when string
}

// knownFinalizers are Kubernetes' own finalizers (and teardown's), with the
// controller that removes each.
var knownFinalizers = map[string]known{
	"kubernetes":                                  {"the namespace controller of kube-controller-manager", "kube-controller-manager", "once the namespace is empty"},
	metav1.FinalizerDeleteDependents:              {"the garbage collector of kube-controller-manager", "kube-controller-manager", "once the dependents with blockOwnerDeletion are gone"},
	metav1.FinalizerOrphanDependents:              {"the garbage collector of kube-controller-manager", "kube-controller-manager", "once the dependents are orphaned"},
	"kubernetes.io/pv-protection":                 {"the pv-protection controller of kube-controller-manager", "kube-controller-manager", "once no claim is bound to the volume"},
	"kubernetes.io/pvc-protection":                {"the pvc-protection controller of kube-controller-manager", "kube-controller-manager", "once no pod uses the claim"},
	"batch.kubernetes.io/job-tracking":            {"the job controller of kube-controller-manager", "kube-controller-manager", "once the job controller has accounted for the pod"},
	"customresourcecleanup.apiextensions.k8s.io":  {"kube-apiserver (apiextensions)", "kube-apiserver", "once every custom resource of the definition is deleted"},
	"service.kubernetes.io/load-balancer-cleanup": {"the service controller of cloud-controller-manager", "cloud-controller-manager", "once the cloud load balancer is deleted"},
	lien.Finalizer:                                {"the teardown controller", "teardown", "once the lien is released"},
	dependents.Finalizer:                          {"the teardown controller", "teardown", "once the dependents are deleted or orphaned as the deletion policy says"},
	v1alpha1.TeardownFinalizer:                    {"the teardown controller", "teardown", "once the Teardown plan has finished"},
	// CleanupFinalizer of internal/controller/lien, which the CLI does not import.
	"teardown.dev/lien-cleanup": {"the teardown controller", "teardown", "once the lien's markers are off the objects it protected"},
}

// knownFinalizer looks finalizer up in knownFinalizers, and knows each
// plan's own finalizer on a trigger.
func knownFinalizer(finalizer string) (known, bool) {
	if k, ok := knownFinalizers[finalizer]; ok {
		return k, true
	}
	if strings.HasPrefix(finalizer, v1alpha1.TriggerFinalizerPrefix) {
		return known{"the teardown controller (or the operator, for a plan it runs with runner.SelfUninstall)", "teardown",
			"once the plan " + strings.TrimPrefix(finalizer, v1alpha1.TriggerFinalizerPrefix) + " has finished"}, true
	}
	return known{}, false
}

// Explain says who removes finalizer (added by manager) and whether it
// appears to run.
func (c *Controllers) Explain(finalizer, manager string) Verdict {
	v := Verdict{Finalizer: finalizer, Manager: manager}
	if k, ok := knownFinalizer(finalizer); ok {
		v.Remover, v.When = k.remover, k.when
		switch k.component {
		case "kube-apiserver":
			v.State, v.Evidence = Running, "kube-apiserver answers"
		case "kube-controller-manager", "cloud-controller-manager":
			v.State, v.Evidence = c.leaseState("kube-system", k.component)
		case "teardown":
			v.State, v.Evidence = c.find([]string{"teardown", "teardown-controller"}, "teardown.dev")
		}
		return v
	}
	domain, _, _ := strings.Cut(finalizer, "/")
	if !strings.Contains(finalizer, "/") {
		domain = ""
	}
	switch {
	case manager == "":
		v.Remover = "the controller of " + orDefault(domain, finalizer)
		v.State, v.Evidence = c.find(nil, domain)
		if v.State == NotRunning {
			v.Evidence = "managedFields do not say who added it, and " + v.Evidence
		}
	case strings.HasPrefix(manager, "kubectl"):
		v.Remover = "nobody: it was added by hand (field manager " + manager + ")"
		v.State = NotRunning
		v.Evidence = "no controller owns a finalizer set with kubectl"
	default:
		v.Remover = manager
		v.State, v.Evidence = c.find([]string{manager}, domain)
	}
	return v
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
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

// find looks for a Deployment running one of programs, or a leader lease
// named after a program or the finalizer's domain.
func (c *Controllers) find(programs []string, domain string) (State, string) {
	var notReady []string
	for _, d := range c.Deployments {
		if !matchesProgram(d, programs) {
			continue
		}
		if d.Ready > 0 {
			return Running, fmt.Sprintf("deployment %s/%s: %d/%d ready", d.Namespace, d.Name, d.Ready, d.Desired)
		}
		notReady = append(notReady, fmt.Sprintf("deployment %s/%s: %d/%d ready", d.Namespace, d.Name, d.Ready, d.Desired))
	}
	var stale []string
	for _, l := range c.Leases {
		if !matchesLease(l, programs, domain) {
			continue
		}
		if l.Fresh {
			return Running, fmt.Sprintf("leader lease %s/%s renewed by %s", l.Namespace, l.Name, l.Holder)
		}
		stale = append(stale, fmt.Sprintf("leader lease %s/%s expired", l.Namespace, l.Name))
	}
	if found := append(notReady, stale...); len(found) > 0 {
		sort.Strings(found)
		return NotRunning, strings.Join(found, "; ")
	}
	var names []string
	for _, p := range programs {
		names = append(names, fmt.Sprintf("%q", p))
	}
	if domain != "" {
		names = append(names, fmt.Sprintf("%q", domain))
	}
	return NotRunning, "no Deployment or leader Lease matching " + strings.Join(names, " or ") + " found"
}

func matchesProgram(d Deployment, programs []string) bool {
	for _, p := range programs {
		if d.Name == p {
			return true
		}
		for _, q := range d.Programs {
			if q == p {
				return true
			}
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
