package cmdutil

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// connectTimeout bounds the first request, so that a cluster that does not
// answer is reported in seconds, not after TCP gives up.
const connectTimeout = 10 * time.Second

// Connect builds the client configuration from kubectl's flags and checks
// that the server answers, so that every verb reports an unreachable or
// missing cluster the same way: one line, exit code 3.
func Connect(ctx context.Context, flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, &UnreachableError{Err: oneLine(err)}
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = connectTimeout
	cs, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return nil, &UnreachableError{Server: cfg.Host, Err: oneLine(err)}
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx); err != nil {
		return nil, &UnreachableError{Server: cfg.Host, Err: oneLine(err)}
	}
	return cfg, nil
}

// oneLine drops the request URL that client-go puts in front of transport
// errors and folds what remains onto one line.
func oneLine(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}
