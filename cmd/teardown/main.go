// Command teardown makes deletion in Kubernetes safe, ordered and complete.
// Installed as kubectl-teardown it is the kubectl plugin `kubectl teardown`.
package main

import (
	"context"
	"os"

	"github.com/teardown-dev/teardown/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args, os.Stdout, os.Stderr))
}
