package kit

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// WidgetGVR is the resource of Widgets, the benchmarks' custom resource: a
// namespaced kind standing for an operator's, any fields allowed.
var WidgetGVR = schema.GroupVersionResource{Group: "bench.teardown.dev", Version: "v1", Resource: "widgets"}

// InstallWidgets creates the Widget CustomResourceDefinition and waits
// until Widgets are served.
func InstallWidgets(ctx context.Context, cfg *rest.Config) error {
	cs, err := cmdutil.NewClientsets(cfg)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: WidgetGVR.GroupResource().String()},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: WidgetGVR.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: WidgetGVR.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
			}},
		},
	}
	if _, err := cs.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the Widget CRD: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Dynamic.Resource(WidgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for widgets to serve: %w", err)
	}
	return nil
}
