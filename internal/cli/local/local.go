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

// upOptions are `teardown local up`'s own flags.
type upOptions struct {
	Serve         []string // NAMESPACE/NAME:PORT=ADDR
	APIServerArgs []string // FLAG=VALUE, for kube-apiserver
	KCMArgs       []string // FLAG=VALUE, for kube-controller-manager
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
	up := &upOptions{}
	upCmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local control plane, or keep the running one; prints the kubeconfig path",
		Long: `Start the local control plane, or keep the running one, and print its
kubeconfig path.

kube-apiserver dials nothing off this machine: what it calls for a webhook, a
conversion webhook or an aggregated API goes through an egress proxy on
loopback, which refuses it at once unless a local server is registered for
the Service (--serve-service here, or 'teardown local serve' later).`,
		Example: `  teardown local up
  teardown local up --serve-service webhooks/guard:443=127.0.0.1:9443
  teardown local up --kube-apiserver-arg=enable-aggregator-routing=true`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.up(cmd, up, out, errOut)
		},
	}
	upCmd.Flags().StringArrayVar(&up.Serve, "serve-service", nil, "NAMESPACE/NAME:PORT=ADDR: a local server (ADDR on loopback) kube-apiserver reaches when it calls that Service's port (repeatable)")
	upCmd.Flags().StringArrayVar(&up.APIServerArgs, "kube-apiserver-arg", nil, "FLAG=VALUE added to kube-apiserver's command line, later ones winning (repeatable)")
	upCmd.Flags().StringArrayVar(&up.KCMArgs, "kube-controller-manager-arg", nil, "FLAG=VALUE added to kube-controller-manager's command line (repeatable)")
	cmd.AddCommand(
		upCmd,
		&cobra.Command{
			Use:   "serve [NAMESPACE/NAME:PORT=ADDR...]",
			Short: "Serve a Service's port from a local server, for a running local control plane; lists what is served",
			Long: `Make kube-apiserver reach ADDR, a server on loopback, whenever it calls PORT
of Service NAMESPACE/NAME (a webhook, a conversion webhook, an aggregated
API). The Service must exist with a ClusterIP; its endpoints do not matter.
It takes effect for the next connection. Without arguments, it lists the
Services served.`,
			Example: `  teardown local serve webhooks/guard:443=127.0.0.1:9443
  teardown local serve`,
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.serve(args, out)
			},
		},
		&cobra.Command{
			Use:     "unserve NAMESPACE/NAME:PORT...",
			Short:   "Stop serving a Service's port: kube-apiserver's calls to it fail again",
			Example: `  teardown local unserve webhooks/guard:443`,
			Args:    cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.unserve(args, errOut)
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

func (o *Options) up(cmd *cobra.Command, up *upOptions, out, errOut io.Writer) error {
	var served []localcluster.ServedService
	for _, s := range up.Serve {
		svc, err := localcluster.ParseServedService(s)
		if err != nil {
			return cmdutil.Usagef("--serve-service %v", err)
		}
		served = append(served, svc)
	}
	apiArgs, err := componentArgs("--kube-apiserver-arg", up.APIServerArgs)
	if err != nil {
		return err
	}
	kcmArgs, err := componentArgs("--kube-controller-manager-arg", up.KCMArgs)
	if err != nil {
		return err
	}
	dir, err := o.dir()
	if err != nil {
		return err
	}
	if c, err := localcluster.Attach(dir); err == nil {
		if c.Running() {
			if len(apiArgs)+len(kcmArgs) > 0 {
				return fmt.Errorf("the local control plane already runs in %s and its command lines cannot change: `teardown local down` first", dir)
			}
			fmt.Fprintf(errOut, "local control plane already running in %s\n", dir)
			if err := serveAll(c, served, errOut); err != nil {
				return err
			}
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
	c, err := localcluster.Start(cmd.Context(), localcluster.Options{
		Dir: dir, CacheDir: cache, Detach: true, Progress: errOut,
		APIServerFlags: apiArgs, ControllerManagerFlags: kcmArgs,
	})
	if err != nil {
		return err
	}
	if err := serveAll(c, served, errOut); err != nil {
		return err
	}
	fmt.Fprintln(out, c.KubeconfigPath())
	return nil
}

// componentArgs turns FLAG=VALUE (or --FLAG=VALUE) into --FLAG=VALUE.
func componentArgs(flag string, in []string) ([]string, error) {
	var out []string
	for _, a := range in {
		a = "--" + strings.TrimLeft(a, "-")
		if a == "--" {
			return nil, cmdutil.Usagef("%s: empty flag", flag)
		}
		out = append(out, a)
	}
	return out, nil
}

func serveAll(c *localcluster.Cluster, served []localcluster.ServedService, errOut io.Writer) error {
	for _, s := range served {
		if err := c.ServeService(s.Namespace, s.Name, s.Port, s.Addr); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "serving Service %s\n", s)
	}
	return nil
}

// running attaches to the cluster in o's directory, which must run.
func (o *Options) running() (*localcluster.Cluster, error) {
	dir, err := o.dir()
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Attach(dir)
	if err != nil || !c.Running() {
		return nil, &cmdutil.UnreachableError{Err: fmt.Errorf("no local control plane runs in %s: start it with `teardown local up`", dir)}
	}
	return c, nil
}

func (o *Options) serve(args []string, out io.Writer) error {
	var served []localcluster.ServedService
	for _, a := range args {
		s, err := localcluster.ParseServedService(a)
		if err != nil {
			return &cmdutil.UsageError{Err: err}
		}
		served = append(served, s)
	}
	c, err := o.running()
	if err != nil {
		return err
	}
	if err := serveAll(c, served, out); err != nil {
		return err
	}
	if len(args) > 0 {
		return nil
	}
	list, err := c.ServedServices()
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(out, "no Service is served: kube-apiserver's calls to Services fail on this machine")
	}
	for _, s := range list {
		fmt.Fprintln(out, s)
	}
	return nil
}

func (o *Options) unserve(args []string, errOut io.Writer) error {
	var gone []localcluster.ServedService
	for _, a := range args {
		s, err := localcluster.ParseServicePort(a)
		if err != nil {
			return &cmdutil.UsageError{Err: err}
		}
		gone = append(gone, s)
	}
	c, err := o.running()
	if err != nil {
		return err
	}
	for _, s := range gone {
		if err := c.StopServing(s.Namespace, s.Name, s.Port); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "no longer serving Service %s/%s:%d\n", s.Namespace, s.Name, s.Port)
	}
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
	c, err := o.running()
	if err != nil {
		return err
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
