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
// what hides a stuck API.
type Clients struct {
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
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	return &Clients{Kube: kube, Dynamic: dyn, Metadata: md, Discovery: cached, Mapper: mapper}, nil
}

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
