package doctor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/heartbeat"
	"github.com/teardown-dev/teardown/internal/install"
)

// GatherControllers lists what may run a controller in all namespaces:
// Deployments, StatefulSets, DaemonSets, Pods that no controller owns, and
// Leases (teardown's heartbeats apart), and reads the Trust for the
// namespaces of teardown's controller. now decides which leases are fresh.
func GatherControllers(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, now time.Time) (*Controllers, error) {
	c := &Controllers{}
	c.TeardownNamespaces, c.TrustRead = TeardownNamespaces(ctx, dyn)
	programs := func(spec corev1.PodSpec) []string {
		var out []string
		for _, ct := range spec.Containers {
			out = append(out, ProgramNames(ct.Name, ct.Command)...)
		}
		return out
	}
	deps, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	for _, d := range deps.Items {
		c.Workloads = append(c.Workloads, Workload{Kind: "deployment", Namespace: d.Namespace, Name: d.Name, Ready: d.Status.ReadyReplicas, Desired: ptr.Deref(d.Spec.Replicas, 1), Programs: programs(d.Spec.Template.Spec)})
	}
	sts, err := kube.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		c.Unlisted = append(c.Unlisted, "statefulsets")
	} else if err != nil {
		return nil, fmt.Errorf("listing statefulsets: %w", err)
	}
	if sts == nil {
		sts = &appsv1.StatefulSetList{}
	}
	for _, s := range sts.Items {
		c.Workloads = append(c.Workloads, Workload{Kind: "statefulset", Namespace: s.Namespace, Name: s.Name, Ready: s.Status.ReadyReplicas, Desired: ptr.Deref(s.Spec.Replicas, 1), Programs: programs(s.Spec.Template.Spec)})
	}
	dss, err := kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		c.Unlisted = append(c.Unlisted, "daemonsets")
	} else if err != nil {
		return nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	if dss == nil {
		dss = &appsv1.DaemonSetList{}
	}
	for _, d := range dss.Items {
		c.Workloads = append(c.Workloads, Workload{Kind: "daemonset", Namespace: d.Namespace, Name: d.Name, Ready: d.Status.NumberReady, Desired: d.Status.DesiredNumberScheduled, Programs: programs(d.Spec.Template.Spec)})
	}
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		c.Unlisted = append(c.Unlisted, "pods")
	} else if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if pods == nil {
		pods = &corev1.PodList{}
	}
	for _, p := range pods.Items {
		if metav1.GetControllerOf(&p) != nil {
			continue // its workload is listed above
		}
		w := Workload{Kind: "pod", Namespace: p.Namespace, Name: p.Name, Desired: 1, Programs: programs(p.Spec)}
		if PodReady(&p) {
			w.Ready = 1
		}
		c.Workloads = append(c.Workloads, w)
	}
	leases, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range leases.Items {
		x := Lease{Namespace: l.Namespace, Name: l.Name, Holder: ptr.Deref(l.Spec.HolderIdentity, ""), Fresh: heartbeat.Fresh(&l, now)}
		if _, ok := l.Labels[v1alpha1.HeartbeatLabel]; ok {
			c.Heartbeats = append(c.Heartbeats, x)
			continue
		}
		c.Leases = append(c.Leases, x)
	}
	return c, nil
}

// TeardownNamespaces are the namespaces of teardown's controller:
// teardown-system, where `teardown install` puts it, and the namespace of
// each service account among the controller users of the Trust teardown
// (the chart's release namespace), when the Trust can be read; read says
// whether it could.
func TeardownNamespaces(ctx context.Context, dyn dynamic.Interface) (namespaces []string, read bool) {
	out := []string{install.Namespace}
	u, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("trusts")).Get(ctx, v1alpha1.TrustName, metav1.GetOptions{})
	if err != nil {
		return out, false
	}
	users, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "controllerUsers")
	for _, user := range users {
		if parts := strings.Split(user, ":"); len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" && !slices.Contains(out, parts[2]) {
			out = append(out, parts[2])
		}
	}
	return out, true
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// GatherWebhooks lists the admission webhooks and, for each service they
// call, whether it has ready endpoints.
func GatherWebhooks(ctx context.Context, kube kubernetes.Interface) ([]Webhook, error) {
	var out []Webhook
	vs, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	for _, cfg := range vs.Items {
		for _, w := range cfg.Webhooks {
			out = append(out, webhook(cfg.Name, false, w.FailurePolicy, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector, w.Name))
		}
	}
	ms, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	for _, cfg := range ms.Items {
		for _, w := range cfg.Webhooks {
			out = append(out, webhook(cfg.Name, true, w.FailurePolicy, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector, w.Name))
		}
	}
	type state struct {
		missing bool
		ready   int
	}
	states := map[string]state{}
	for i, w := range out {
		if w.Service == "" || !w.FailClosed {
			continue
		}
		st, ok := states[w.Service]
		if !ok {
			ns, name := splitRef(w.Service)
			if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				st.missing = true
			} else if err != nil {
				return nil, fmt.Errorf("reading service %s: %w", w.Service, err)
			}
			slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
			if err != nil {
				return nil, fmt.Errorf("listing endpoint slices of service %s: %w", w.Service, err)
			}
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						st.ready++
					}
				}
			}
			states[w.Service] = st
		}
		out[i].ServiceMissing, out[i].ReadyEndpoints = st.missing, st.ready
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Configuration != out[j].Configuration {
			return out[i].Configuration < out[j].Configuration
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func webhook(cfg string, mutating bool, fp *admissionv1.FailurePolicyType, cc admissionv1.WebhookClientConfig, rules []admissionv1.RuleWithOperations, nsSel, objSel *metav1.LabelSelector, name string) Webhook {
	w := Webhook{
		Configuration: cfg, Name: name, Mutating: mutating,
		FailClosed: fp == nil || *fp == admissionv1.Fail,
		Rules:      rules, NamespaceSelector: nsSel, ObjectSelector: objSel,
	}
	if cc.Service != nil {
		w.Service = cc.Service.Namespace + "/" + cc.Service.Name
	}
	return w
}

func splitRef(ref string) (string, string) {
	for i := range ref {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return "", ref
}

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// GatherUnavailableAPIServices lists the APIServices that are not Available.
func GatherUnavailableAPIServices(ctx context.Context, dyn dynamic.Interface) ([]APIService, error) {
	list, err := dyn.Resource(apiServicesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing apiservices: %w", err)
	}
	var out []APIService
	for _, item := range list.Items {
		conds, _, _ := unstructured.NestedSlice(item.Object, "status", "conditions")
		a := APIService{Name: item.GetName(), Reason: "NoStatus", Message: "the aggregator has not reported on it"}
		available := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Available" {
				continue
			}
			available = m["status"] == "True"
			a.Reason, _ = m["reason"].(string)
			a.Message, _ = m["message"].(string)
		}
		if available {
			continue
		}
		ns, _, _ := unstructured.NestedString(item.Object, "spec", "service", "namespace")
		name, _, _ := unstructured.NestedString(item.Object, "spec", "service", "name")
		if name != "" {
			a.Service = ns + "/" + name
		}
		out = append(out, a)
	}
	return out, nil
}

// LienObject is what a Lien or ClusterLien object says, when the API is served.
type LienObject struct {
	Reason string
	// HeldBy names the holders for people: [ns/]Kind/name, or
	// Kind/(selector).
	HeldBy []string
	// Holders are the same holders, resolved for matching against objects.
	Holders []Holder
}

// Holder is one heldBy entry of a lien, its namespace defaulted to the
// Lien's.
type Holder struct {
	GroupKind schema.GroupKind
	Namespace string
	// Name is empty for a selector holder.
	Name     string
	Selector labels.Selector
}

// Holds reports whether the holder names the object gk ns/name with labels lbls.
func (h Holder) Holds(gk schema.GroupKind, ns, name string, lbls map[string]string) bool {
	if h.GroupKind != gk || h.Namespace != ns {
		return false
	}
	if h.Name != "" {
		return h.Name == name
	}
	return h.Selector != nil && h.Selector.Matches(labels.Set(lbls))
}

var (
	liensGVR        = v1alpha1.GroupVersion.WithResource("liens")
	clusterLiensGVR = v1alpha1.GroupVersion.WithResource("clusterliens")
)

// GatherLienObjects reads the named liens ("ns/name" or "name"); names
// whose object cannot be read (API not installed, lien gone) are left out.
func GatherLienObjects(ctx context.Context, dyn dynamic.Interface, names []string) map[string]LienObject {
	out := map[string]LienObject{}
	for _, n := range names {
		ns, name := splitRef(n)
		var obj *unstructured.Unstructured
		var err error
		if ns != "" {
			obj, err = dyn.Resource(liensGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			obj, err = dyn.Resource(clusterLiensGVR).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			continue
		}
		lo := LienObject{}
		lo.Reason, _, _ = unstructured.NestedString(obj.Object, "spec", "reason")
		held, _, _ := unstructured.NestedSlice(obj.Object, "spec", "heldBy")
		for _, h := range held {
			m, _ := h.(map[string]any)
			kind, _ := m["kind"].(string)
			hname, _ := m["name"].(string)
			if hname == "" {
				hname = "(selector)"
			}
			ref := kind + "/" + hname
			hns, _ := m["namespace"].(string)
			if hns != "" {
				ref = hns + "/" + ref
			}
			lo.HeldBy = append(lo.HeldBy, ref)
			lo.Holders = append(lo.Holders, holderOf(m, kind, ns, hns))
		}
		out[n] = lo
	}
	return out
}

// holderOf resolves one heldBy entry m of a lien in namespace lienNS ("" for
// a ClusterLien); a selector that does not parse matches nothing.
func holderOf(m map[string]any, kind, lienNS, ns string) Holder {
	apiVersion, _ := m["apiVersion"].(string)
	h := Holder{GroupKind: groupKind(apiVersion, kind), Namespace: ns}
	if h.Namespace == "" {
		h.Namespace = lienNS
	}
	h.Name, _ = m["name"].(string)
	if sel, ok := m["selector"].(map[string]any); ok && h.Name == "" {
		var ls metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err == nil {
			h.Selector, _ = metav1.LabelSelectorAsSelector(&ls)
		}
	}
	return h
}
