// Package b stands for a package of internal: it imports anything but cmd.
package b

import (
	_ "github.com/teardown-dev/teardown/api/v1alpha1"
	_ "github.com/teardown-dev/teardown/cmd/a" // want internal
	_ "github.com/teardown-dev/teardown/internal/a"
	_ "github.com/teardown-dev/teardown/pkg/a"
)
