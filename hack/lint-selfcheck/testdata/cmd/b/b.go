// Package b stands for a package of cmd: it imports any layer.
package b

import (
	_ "github.com/teardown-dev/teardown/api/v1alpha1"
	_ "github.com/teardown-dev/teardown/cmd/a"
	_ "github.com/teardown-dev/teardown/internal/a"
	_ "github.com/teardown-dev/teardown/pkg/a"
)
