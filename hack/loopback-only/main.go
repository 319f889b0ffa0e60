// Command loopback-only runs a command in a new network namespace whose
// only interface is loopback, so that nothing it starts can dial another
// machine (docs/localcluster.md): `make test` runs the packages whose tests
// make kube-apiserver call webhooks and aggregated APIs through it. It
// needs root.
//
//	go run ./hack/loopback-only -- go test ./internal/cli/why/...
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/teardown-dev/teardown/localcluster"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: loopback-only [--] COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd, err := localcluster.LoopbackOnlyCommand(args[0], args[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback-only:", err)
		os.Exit(1)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() > 0 {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "loopback-only:", err)
		os.Exit(1)
	}
}
