//go:build integration

package lien

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// crd installs a CRD with a free-form schema and waits until it serves.
func crd(t *testing.T, group, kind, plural string, scope apiextensionsv1.ResourceScope) schema.GroupVersionKind {
	t.Helper()
	ctx := t.Context()
	obj := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
			}},
		},
	}
	if err := k.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
	eventually(t, 30*time.Second, "CRD "+obj.Name+" to serve", func(ctx context.Context) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		return k.List(ctx, l) == nil, nil
	})
	return gvk
}

// selectorLien is the Lien ns/name protecting the objects of kind gvk in
// ns that labels select, for reason "r".
func selectorLien(ns, name string, gvk schema.GroupVersionKind, labels map[string]string) *v1alpha1.Lien {
	return &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{selectorTarget(gvk, labels)}, Reason: "r"},
	}
}

// selectorTarget is the lien target of the objects of kind gvk that labels
// select.
func selectorTarget(gvk schema.GroupVersionKind, labels map[string]string) v1alpha1.LienTarget {
	return v1alpha1.LienTarget{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Selector: &metav1.LabelSelector{MatchLabels: labels}}
}

var (
	configMapKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	secretKind    = corev1.SchemeGroupVersion.WithKind("Secret")
)

func custom(gvk schema.GroupVersionKind, namespace, name string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetFinalizers(finalizers)
	return u
}

// removeFinalizer takes f off obj, retrying on conflicts, as the given client.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, f string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		if !controllerutil.RemoveFinalizer(obj, f) {
			return true, nil
		}
		err := c.Update(ctx, obj)
		return err == nil || apierrors.IsNotFound(err), nil
	})
}

const helmFinalizer = "example.com/uninstall-helm-release"

// helmOperator is the helm-operator of the seed thread, reduced to its
// delete path: when a Foo is being deleted it waits a second, reads the
// release Secret and deletes the cluster-scoped objects listed in it, then
// removes its finalizer. A missing release Secret is logged, as the real
// one does ("Release not found, removing finalizer"), and the finalizer goes.
type helmOperator struct {
	foo            schema.GroupVersionKind
	namespace      string
	releaseMissing chan string // names of Foos whose release was gone
}

func runHelmOperator(ctx context.Context, t *testing.T, foo schema.GroupVersionKind, namespace string) *helmOperator {
	op := &helmOperator{foo: foo, namespace: namespace, releaseMissing: make(chan string, 10)}
	go func() {
		handled := map[string]bool{}
		for ctx.Err() == nil {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(foo.GroupVersion().WithKind(foo.Kind + "List"))
			if err := k.List(ctx, l, client.InNamespace(namespace)); err == nil {
				for i := range l.Items {
					cr := &l.Items[i]
					if cr.GetDeletionTimestamp() == nil || handled[cr.GetName()] || !controllerutil.ContainsFinalizer(cr, helmFinalizer) {
						continue
					}
					handled[cr.GetName()] = true
					go op.uninstall(ctx, t, cr)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return op
}

func (op *helmOperator) uninstall(ctx context.Context, t *testing.T, cr *unstructured.Unstructured) {
	time.Sleep(time.Second)
	var release corev1.Secret
	err := k.Get(ctx, client.ObjectKey{Namespace: op.namespace, Name: releaseName(cr.GetName())}, &release)
	switch {
	case apierrors.IsNotFound(err):
		op.releaseMissing <- cr.GetName()
	case err != nil:
		t.Errorf("helm operator: reading the release: %v", err)
		return
	default:
		var manifest []string
		if err := json.Unmarshal(release.Data["webhooks"], &manifest); err != nil {
			t.Errorf("helm operator: decoding the release: %v", err)
			return
		}
		for _, name := range manifest {
			vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if err := k.Delete(ctx, vwc); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("helm operator: uninstalling %s: %v", name, err)
			}
		}
	}
	if err := removeFinalizer(ctx, k, cr, helmFinalizer); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("helm operator: removing the finalizer: %v", err)
	}
}

func releaseName(foo string) string { return "sh.helm.release.v1." + foo + ".v1" }

// installRelease creates what `helm install` of the Foo's chart would: the
// release Secret listing a cluster-scoped ValidatingWebhookConfiguration,
// and that webhook configuration (inert: it matches nothing that exists).
func installRelease(t *testing.T, namespace, foo string) *admissionv1.ValidatingWebhookConfiguration {
	t.Helper()
	ctx := t.Context()
	vwcName := namespace + "-" + foo + "-foo-validation"
	manifest, _ := json.Marshal([]string{vwcName})
	if err := k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: releaseName(foo), Labels: map[string]string{"owner": "helm", "name": foo}},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"webhooks": manifest},
	}); err != nil {
		t.Fatal(err)
	}
	url := "https://127.0.0.1:1/validate"
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vwcName, Annotations: map[string]string{"meta.helm.sh/release-name": foo, "meta.helm.sh/release-namespace": namespace}},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "validate.foo.example.com",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"nothing.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
			FailurePolicy:           new(admissionv1.Ignore),
			SideEffects:             new(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := k.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	return vwc
}
