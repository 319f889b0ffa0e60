// Package runner stands for the planner's client side: it may import a client.
package runner

import (
	_ "k8s.io/client-go/rest"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
)
