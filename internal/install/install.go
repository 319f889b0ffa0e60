// Package install applies teardown's manifests (config/: CRDs, RBAC, the
// lien ValidatingAdmissionPolicies) to a cluster with server-side apply,
// and waits until the CRDs serve and the lien policy is enforced; and
// deletes them again, the policies first, so that no object is left
// undeletable.
package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/config"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Namespace is where teardown's controller lives.
const Namespace = "teardown-system"

// ControllerServiceAccount is the in-cluster controller's ServiceAccount,
// in Namespace.
const ControllerServiceAccount = "teardown-controller"

// ControllerUser is the identity of the in-cluster controller.
const ControllerUser = "system:serviceaccount:" + Namespace + ":" + ControllerServiceAccount

// FieldManager owns the fields install applies.
const FieldManager = "teardown-install"

// Options change what is installed.
type Options struct {
	// ControllerUsers are added to those trusted to change lien markers,
	// for a controller that runs outside the cluster under another identity.
	ControllerUsers []string
	// BreakGlassGroups replace the groups allowed to change lien markers by
	// hand; empty keeps teardown.dev:break-glass.
	BreakGlassGroups []string
	// ControllerImage, if set, also installs the controller's Deployment
	// (two replicas), PodDisruptionBudget and metrics Service with it.
	ControllerImage string
	// Grants, if not empty, installs GrantsRole granting exactly these;
	// empty leaves GrantsRole as it is.
	Grants Grants
}

// Objects are the manifests to apply, in order, with opts applied.
func Objects(opts Options) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	files := config.Files
	if opts.ControllerImage != "" {
		files = append(slices.Clone(files), config.ControllerFiles...)
	}
	for _, name := range files {
		data, err := config.Manifests.ReadFile(name)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", name, err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", name, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			objs = append(objs, u)
		}
	}
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == "teardown-controller" {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c.(map[string]any)["image"] = opts.ControllerImage
			}
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				return nil, err
			}
		}
		if u.GetKind() == "Trust" {
			users, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "controllerUsers")
			all := append(users, opts.ControllerUsers...)
			slices.Sort(all)
			if err := unstructured.SetNestedStringSlice(u.Object, slices.Compact(all), "spec", "controllerUsers"); err != nil {
				return nil, err
			}
			if len(opts.BreakGlassGroups) > 0 {
				if err := unstructured.SetNestedStringSlice(u.Object, opts.BreakGlassGroups, "spec", "breakGlassGroups"); err != nil {
					return nil, err
				}
			}
		}
	}
	if !opts.Grants.Empty() {
		role, err := grantsRole(opts.Grants)
		if err != nil {
			return nil, err
		}
		// After the controller's RBAC, before the policies.
		at := slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Trust" })
		objs = slices.Insert(objs, at, role)
	}
	return objs, nil
}

// Render writes the objects as one YAML stream, for --dry-run.
func Render(w io.Writer, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

// Apply server-side applies the objects, CRDs first, and returns once the
// CRDs are established and the lien policy refuses a DELETE. It is
// idempotent. Progress lines go to out.
func Apply(ctx context.Context, cfg *rest.Config, opts Options, out io.Writer) error {
	objs, err := Objects(opts)
	if err != nil {
		return err
	}
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		target, err := c.resource(u)
		if meta.IsNoMatchError(err) && optional(u) {
			fmt.Fprintf(out, "skipped %s/%s: this cluster does not serve %s (Kubernetes 1.36 and later do); Helm cannot write the release records a lien protects (docs/liens.md, \"Helm releases\")\n",
				strings.ToLower(gvk.Kind), u.GetName(), gvk.GroupVersion())
			continue
		}
		if err != nil {
			return err
		}
		if _, err := target.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		fmt.Fprintf(out, "applied %s/%s\n", strings.ToLower(gvk.Kind), u.GetName())
		if gvk.Kind == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, c.dyn, u.GetName()); err != nil {
				return err
			}
			meta.MaybeResetRESTMapper(c.mapper) // Trust is applied next
		}
	}
	if err := waitEnforced(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintln(out, "lien policy enforced")
	if err := waitOwnerLinksEnforced(ctx, cfg); err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetKind() == "Trust" {
			users, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "controllerUsers")
			groups, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "breakGlassGroups")
			fmt.Fprintf(out, "the lien policies trust %s to change lien markers: run the controller as one of them (teardown controller impersonates %s when it may)\n",
				Trust{ControllerUsers: users, BreakGlassGroups: groups}, ControllerUser)
		}
	}
	// What is granted is a report: the install is done without it.
	if err := ReportGrants(ctx, cfg, out); err != nil {
		fmt.Fprintf(out, "could not say what teardown's controller is granted: %v\n", err)
	}
	return nil
}

// optional: objects of kinds older clusters do not serve, which install
// skips there (the MutatingAdmissionPolicy for Helm's release records).
func optional(u *unstructured.Unstructured) bool {
	return u.GetKind() == "MutatingAdmissionPolicy" || u.GetKind() == "MutatingAdmissionPolicyBinding"
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// waitEnforced returns once kube-apiserver has loaded the lien policy: the
// dry-run DELETE of a labelled probe ConfigMap is refused (probeDelete).
// The probe is created as the controller (the tamper policy lets only the
// controller create an object with the lien label, or take it off), and
// unlabelled as the controller and deleted whatever the wait's outcome.
func waitEnforced(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	asController := rest.CopyConfig(cfg)
	asController.Impersonate = rest.ImpersonationConfig{UserName: ControllerUser, Groups: []string{"system:masters"}}
	ccs, err := kubernetes.NewForConfig(asController)
	if err != nil {
		return err
	}
	cms, marker := cs.CoreV1().ConfigMaps(Namespace), ccs.CoreV1().ConfigMaps(Namespace)
	var created *corev1.ConfigMap
	// The tamper policy's parameters may take a moment to be seen: until
	// then it refuses the create.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, err = marker.Create(ctx, probe(metav1.ObjectMeta{GenerateName: lien.InstallProbePrefix}, lien.InstallProbeLien, "teardown install checks that the lien policy is enforced"), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("creating the policy probe: %w", err)
	}
	err = probeDelete(ctx, cms, marker, created, true)
	if err != nil {
		err = fmt.Errorf("waiting for kube-apiserver to enforce the lien policy (probe %s/%s): %w", Namespace, created.Name, err)
	}
	// The probe goes even if the wait failed or was interrupted.
	return errors.Join(err, removeProbe(ctx, cms, marker, Namespace, created.Name))
}
