package b

import (
	_ "github.com/teardown-dev/teardown/cmd/a"      // want pkg-tests
	_ "github.com/teardown-dev/teardown/internal/a" // want pkg-tests
	_ "github.com/teardown-dev/teardown/internal/testenv"
	_ "github.com/teardown-dev/teardown/pkg/a"
)
