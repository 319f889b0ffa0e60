// Command gencli writes the CLI reference, docs/cli/*.md, from the cobra
// commands themselves: `make docs`. A test fails when it is stale.
package main

import (
	"fmt"
	"os"

	"github.com/teardown-dev/teardown/internal/cli"
)

func main() {
	if err := cli.WriteReference("docs/cli"); err != nil {
		fmt.Fprintln(os.Stderr, "gencli:", err)
		os.Exit(1)
	}
}
