package resource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// Clients are the clients the doctor's verbs read through. Discovery is
// fresh (cached in memory for one run only): a stale disk cache is exactly
// what hides a stuck API. Clients are the RESTClientGetter of cli-runtime's
// resource.Builder (Get), so that arguments resolve through the same
// discovery, not through kubectl's disk cache.
type Clients struct {
	Config    *rest.Config
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
	Discovery discovery.CachedDiscoveryInterface
	Mapper    meta.RESTMapper
}

// NewClients builds the clients from cfg. Lists run in parallel, so the
// client-side rate limit is raised above client-go's default of 5/s.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = 200
		cfg.Burst = 400
	}
	// Deprecation warnings of listed APIs (v1 ComponentStatus, v1
	// Endpoints) are noise for a person asking about a deletion.
	cfg.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	cached, mapper := mapperFor(disc)
	return &Clients{Config: cfg, Kube: kube, Dynamic: dyn, Metadata: md, Discovery: cached, Mapper: mapper}, nil
}

// mapperFor caches disc in memory, for one run, and maps kinds, resources
// and short names through it.
func mapperFor(disc discovery.DiscoveryInterface) (discovery.CachedDiscoveryInterface, meta.RESTMapper) {
	cached := memory.NewMemCacheClient(disc)
	return cached, restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
}

// ToRESTConfig is the configuration the clients were made from.
func (c *Clients) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(c.Config), nil }

// ToDiscoveryClient is the clients' fresh, in-memory discovery.
func (c *Clients) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return c.Discovery, nil
}

// ToRESTMapper is the clients' mapper, short names included.
func (c *Clients) ToRESTMapper() (meta.RESTMapper, error) { return c.Mapper, nil }

// Connect reaches the cluster of kubectl's flags (exit code 3 when it
// cannot) and returns the clients and the namespace that -n or the
// kubeconfig's context names.
func Connect(ctx context.Context, flags *genericclioptions.ConfigFlags) (*Clients, string, error) {
	cfg, err := cmdutil.Connect(ctx, flags)
	if err != nil {
		return nil, "", err
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", cmdutil.Usagef("reading the namespace: %w", err)
	}
	clients, err := NewClients(cfg)
	if err != nil {
		return nil, "", err
	}
	return clients, ns, nil
}
