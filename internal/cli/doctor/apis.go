package doctor

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// CRD is what the doctor needs to know of a CustomResourceDefinition.
type CRD struct {
	Name, Group, Kind, Plural string
	Namespaced                bool
	// Versions are the served versions; Storage is the storage version.
	Versions []string
	Storage  string
	// Webhook is the conversion webhook's service (namespace/name) or URL,
	// when spec.conversion.strategy is Webhook.
	Webhook string
	// WebhookNamespace is the namespace of the webhook's service.
	WebhookNamespace string
}

// GVR is the resource at version v.
func (c CRD) GVR(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: c.Group, Version: v, Resource: c.Plural}
}

// Resource is plural.group, as kubectl names the resource.
func (c CRD) Resource() string { return c.Plural + "." + c.Group }

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// GatherCRDs lists the CustomResourceDefinitions.
func GatherCRDs(ctx context.Context, dyn dynamic.Interface) ([]CRD, error) {
	list, err := dyn.Resource(crdsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing customresourcedefinitions: %w", err)
	}
	out := make([]CRD, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, CRDOf(&list.Items[i]))
	}
	return out, nil
}

// CRDOf reads a CustomResourceDefinition.
func CRDOf(u *unstructured.Unstructured) CRD {
	c := CRD{Name: u.GetName()}
	c.Group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "names", "kind")
	c.Plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
	c.Namespaced = scope == "Namespaced"
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); served {
			c.Versions = append(c.Versions, name)
		}
		if storage, _ := m["storage"].(bool); storage {
			c.Storage = name
		}
	}
	if strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); strategy == "Webhook" {
		ns, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
		name, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
		url, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "webhook", "clientConfig", "url")
		switch {
		case name != "":
			c.Webhook, c.WebhookNamespace = "service "+ns+"/"+name, ns
		case url != "":
			c.Webhook = "URL " + url
		default:
			c.Webhook = "(no client config)"
		}
	}
	return c
}

// CRDOfResource finds the CRD that serves the resource listed as key (a
// GroupVersionResource's String(), as resource.Gather reports failures).
func CRDOfResource(crds []CRD, key string) (CRD, bool) {
	for _, c := range crds {
		for _, v := range c.Versions {
			if c.GVR(v).String() == key {
				return c, true
			}
		}
	}
	return CRD{}, false
}
