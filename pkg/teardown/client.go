package teardown

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewClient returns the live client a Runner needs: no cache, and a REST
// mapper that looks again when a kind is unknown, so that a CRD installed
// after the client was made is found (and one deleted is seen gone).
func NewClient(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	m := &refreshingMapper{restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: m})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, nil
}

// refreshingMapper re-reads discovery when a kind is not found.
type refreshingMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper
}

func (m *refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.Reset()
		mapping, err = m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	}
	return mapping, err
}

func (m *refreshingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mappings, err := m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.Reset()
		mappings, err = m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	}
	return mappings, err
}

func (m *refreshingMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	gvk, err := m.DeferredDiscoveryRESTMapper.KindFor(resource)
	if meta.IsNoMatchError(err) {
		m.Reset()
		gvk, err = m.DeferredDiscoveryRESTMapper.KindFor(resource)
	}
	return gvk, err
}
