// Package teardown stands for the pure planner: it imports no client.
package teardown

import (
	_ "k8s.io/apimachinery/pkg/runtime/schema"
	_ "k8s.io/client-go/rest"                     // want planner
	_ "sigs.k8s.io/controller-runtime/pkg/client" // want planner
)
