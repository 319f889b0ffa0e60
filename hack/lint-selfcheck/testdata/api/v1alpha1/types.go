// Package v1alpha1 stands for the API types: it imports no other layer.
package v1alpha1

import (
	_ "github.com/teardown-dev/teardown/cmd/a"      // want api
	_ "github.com/teardown-dev/teardown/internal/a" // want api
	_ "github.com/teardown-dev/teardown/pkg/a"      // want api
	_ "k8s.io/apimachinery/pkg/runtime/schema"
)
