// Package b stands for a package of pkg: it imports api and pkg only.
package b

import (
	_ "github.com/teardown-dev/teardown/api/v1alpha1"
	_ "github.com/teardown-dev/teardown/cmd/a"            // want pkg
	_ "github.com/teardown-dev/teardown/internal/a"       // want pkg
	_ "github.com/teardown-dev/teardown/internal/testenv" // want pkg
	_ "github.com/teardown-dev/teardown/pkg/a"
)
