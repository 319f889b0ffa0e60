// Package local is `teardown local`: the local control plane as a
// long-running cluster for a person at a terminal, started once and used
// with kubectl until `teardown local down`.
package local

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/localcluster"
)

// Options are the flags shared by the local verbs.
type Options struct {
	Dir      string // the cluster's state directory
	CacheDir string // the binary cache
}

// NewCommand returns `teardown local` with its verbs.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a real local control plane (etcd, kube-apiserver, kube-controller-manager)",
		Long: `Run a real Kubernetes control plane on loopback, built once from the Go module
proxy at ` + localcluster.KubernetesVersion + ` and cached: etcd, kube-apiserver and
kube-controller-manager with the garbage collector and the namespace controller,
so deletion behaves as in a real cluster. No kubelet runs: Pods never start.

` + localcluster.VersionEnv + ` chooses another pinned version (docs/compatibility.md),
each built and cached apart: ` + localcluster.VersionEnv + `=v1.35.4 teardown local up.`,
	}
	cmd.PersistentFlags().StringVar(&o.Dir, "dir", "", "state directory of the local cluster (default: local/ in the cache directory)")
	cmd.PersistentFlags().StringVar(&o.CacheDir, "build-cache", "", "where the built binaries are cached (default: $TEARDOWN_CACHE, else teardown/ in the user cache directory)")
	cmd.AddCommand(
		&cobra.Command{
			Use:   "up",
			Short: "Start the local control plane, or keep the running one; prints the kubeconfig path",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return o.up(cmd, out, errOut)
			},
		},
		&cobra.Command{
			Use:   "down",
			Short: "Stop the local control plane and remove its state",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return o.down(errOut)
			},
		},
		&cobra.Command{
			Use:     "env",
			Short:   "Print the shell command that points kubectl at the local control plane",
			Example: `  eval "$(teardown local env)"`,
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return o.env(out)
			},
		},
		&cobra.Command{
			Use:   "build",
			Short: "Build and cache the control-plane binaries without starting them",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cache, err := o.cacheDir()
				if err != nil {
					return err
				}
				bins, err := localcluster.EnsureBinaries(cmd.Context(), cache, errOut)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, filepath.Dir(bins.APIServer))
				return nil
			},
		},
	)
	return cmd
}

func (o *Options) cacheDir() (string, error) {
	if o.CacheDir != "" {
		return filepath.Abs(o.CacheDir)
	}
	return localcluster.DefaultCacheDir()
}

func (o *Options) dir() (string, error) {
	if o.Dir != "" {
		return filepath.Abs(o.Dir)
	}
	cache, err := o.cacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "local"), nil
}

func (o *Options) up(cmd *cobra.Command, out, errOut io.Writer) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	if c, err := localcluster.Attach(dir); err == nil {
		if c.Running() {
			fmt.Fprintf(errOut, "local control plane already running in %s\n", dir)
			fmt.Fprintln(out, c.KubeconfigPath())
			return nil
		}
		// A previous cluster died: stop whatever is left and start afresh.
		if err := c.Stop(); err != nil {
			return fmt.Errorf("stopping what is left of the previous local cluster: %w", err)
		}
	}
	// A fresh start: old certificates and etcd data would not match.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	cache, err := o.cacheDir()
	if err != nil {
		return err
	}
	c, err := localcluster.Start(cmd.Context(), localcluster.Options{Dir: dir, CacheDir: cache, Detach: true, Progress: errOut})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, c.KubeconfigPath())
	return nil
}

func (o *Options) down(errOut io.Writer) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	c, err := localcluster.Attach(dir)
	if err != nil {
		fmt.Fprintf(errOut, "no local control plane in %s\n", dir)
		return nil
	}
	if err := c.Stop(); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(errOut, "local control plane stopped; %s removed\n", dir)
	return nil
}

func (o *Options) env(out io.Writer) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	c, err := localcluster.Attach(dir)
	if err != nil || !c.Running() {
		return &cmdutil.UnreachableError{Err: fmt.Errorf("no local control plane runs in %s: start it with `teardown local up`", dir)}
	}
	fmt.Fprintf(out, "export KUBECONFIG=%s\n", shellQuote(c.KubeconfigPath()))
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	plain := func(r rune) bool {
		return strings.ContainsRune("/-_.", r) || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	for _, r := range s {
		if !plain(r) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
