// Command helm-teardown is the operator of the chart beside it: it puts its
// finalizer on every Widget and, when a Widget is deleted, cleans up for
// --cleanup (a step every --step, each a request with its own identity)
// before it removes the finalizer. The cleanup is deliberately longer than
// the minute for which kube-apiserver still accepts a ServiceAccount token
// once its ServiceAccount or Pod is being deleted: the chart's Teardown must
// keep the operator's identity working, not just its objects present.
//
// With --records FILE it writes, one JSON object a line, who it is (a
// SelfSubjectReview at start), every request it sends with its status code,
// and each Widget it finalized: test/e2e/operator_uninstall_test.go reads
// them.
//
// The Deployment sets POD_NAMESPACE from the downward API; the operator
// elects its leader with a Lease there.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	finalizer = "widget-operator.example.com/cleanup"
	progress  = "widget-operator.example.com/cleanup-progress"
)

func main() {
	group := flag.String("group", "example.com", "the Widget API group (the chart's apiGroup)")
	cleanup := flag.Duration("cleanup", 95*time.Second, "how long the cleanup of a deleted Widget takes, from its deletionTimestamp")
	step := flag.Duration("step", 15*time.Second, "how often the cleanup reports its progress on the Widget")
	records := flag.String("records", "", "write who the operator is, its requests and the Widgets it finalized to this file, as JSON lines")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("widget-operator")
	if err := run(*group, *cleanup, *step, *records); err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run(group string, cleanup, step time.Duration, records string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	rec := &recorder{}
	if records != "" {
		f, err := os.Create(records)
		if err != nil {
			return err
		}
		defer f.Close()
		rec.enc = json.NewEncoder(f)
	}
	cfg.Wrap(rec.wrap)
	ctx := ctrl.SetupSignalHandler()
	if err := rec.whoami(ctx, cfg); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "widget-operator." + group,
		LeaderElectionNamespace:       os.Getenv("POD_NAMESPACE"),
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(gvk)
	r := &reconciler{Client: mgr.GetClient(), gvk: gvk, cleanup: cleanup, step: step, rec: rec}
	if err := ctrl.NewControllerManagedBy(mgr).For(widget).Named("widget").Complete(r); err != nil {
		return fmt.Errorf("setting up the widget controller: %w", err)
	}
	return mgr.Start(ctx)
}

// reconciler finalizes Widgets.
type reconciler struct {
	client.Client
	gvk     schema.GroupVersionKind
	cleanup time.Duration
	step    time.Duration
	rec     *recorder
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(r.gvk)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if w.GetDeletionTimestamp() == nil {
		if !controllerutil.AddFinalizer(w, finalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.Update(ctx, w); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(w, finalizer) {
		return ctrl.Result{}, nil
	}
	base := w.DeepCopy()
	if elapsed := time.Since(w.GetDeletionTimestamp().Time); elapsed < r.cleanup {
		// One step of the cleanup, done with the operator's own identity.
		ann := w.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[progress] = fmt.Sprintf("%s of %s", elapsed.Truncate(time.Second), r.cleanup)
		w.SetAnnotations(ann)
		if err := r.Patch(ctx, w, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, fmt.Errorf("reporting the cleanup's progress: %w", err)
		}
		return ctrl.Result{RequeueAfter: min(r.step, r.cleanup-elapsed)}, nil
	}
	controllerutil.RemoveFinalizer(w, finalizer)
	if err := r.Patch(ctx, w, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	r.rec.write(record{Finalized: req.String()})
	return ctrl.Result{}, nil
}

// record is one line of the records file.
type record struct {
	Time time.Time `json:"time"`
	// A request: its method, path and status code (0: no response).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Code   int    `json:"code,omitempty"`
	// Who the operator is, from a SelfSubjectReview.
	User  string              `json:"user,omitempty"`
	Extra map[string][]string `json:"extra,omitempty"`
	// A Widget whose finalizer the operator removed, as namespace/name.
	Finalized string `json:"finalized,omitempty"`
}

// recorder writes records; with no file, it writes nothing.
type recorder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (rec *recorder) write(r record) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.enc == nil {
		return
	}
	r.Time = time.Now()
	_ = rec.enc.Encode(r)
}

// wrap records every request the transport sends.
func (rec *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		r := record{Method: req.Method, Path: req.URL.Path}
		if req.URL.Query().Get("watch") == "true" {
			r.Method = "WATCH"
		}
		if resp != nil {
			r.Code = resp.StatusCode
		}
		rec.write(r)
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// whoami records the user the API server sees.
func (rec *recorder) whoami(ctx context.Context, cfg *rest.Config) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking who the operator is: %w", err)
	}
	u := review.Status.UserInfo
	if u.Username == "" {
		return errors.New("asking who the operator is: no user name")
	}
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	rec.write(record{User: u.Username, Extra: extra})
	return nil
}
