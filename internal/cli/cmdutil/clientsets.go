package cmdutil

import (
	"fmt"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clientsets are the typed, dynamic and apiextensions clients of one
// configuration, for what creates objects of every sort (the demo, the
// CLI's integration tests).
type Clientsets struct {
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Extensions apiextensions.Interface
}

// NewClientsets builds the clientsets from cfg.
func NewClientsets(cfg *rest.Config) (Clientsets, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clientsets{}, fmt.Errorf("creating the client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clientsets{}, fmt.Errorf("creating the dynamic client: %w", err)
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return Clientsets{}, fmt.Errorf("creating the apiextensions client: %w", err)
	}
	return Clientsets{Kube: kube, Dynamic: dyn, Extensions: ext}, nil
}
