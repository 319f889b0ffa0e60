package why

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// TestRenderNotInForce: a Secret that a lien names but cannot protect (its
// controller may not patch Secrets), that is a plan's trigger the plan
// cannot arm on, and that carries an owner link nothing will collect.
func TestRenderNotInForce(t *testing.T) {
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{
		"name": "s1", "namespace": "app",
		"labels":      map[string]any{dependents.OwnedLabel: "true"},
		"annotations": map[string]any{dependents.OwnersAnnotation: `[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"u1"}]`},
	}}}
	missing := "teardown's controller may not patch secrets in namespace app: grant verb patch on resource secrets (group \"\") with a ClusterRole labelled teardown.dev/aggregate-to-controller=true (needed to protect s1)"
	f := &Facts{
		Target:      &cliresource.Info{Mapping: &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Scope: meta.RESTScopeNamespace}, Namespace: "app", Name: "s1"},
		Object:      secret,
		Controllers: &doctor.Controllers{},
		Plans: []doctor.Plan{{Name: "app-uninstall", Steps: []string{"delete-data"},
			Trigger: &doctor.PlanObject{GroupKind: schema.GroupKind{Kind: "Secret"}, Namespace: "app", Name: "s1"},
			Armed:   v1alpha1.ReasonMissingPermission + ": " + "teardown's controller may not patch secrets in namespace app: grant verb patch on resource secrets (group \"\") with a ClusterRole labelled teardown.dev/aggregate-to-controller=true"}},
		NotInForce: NotInForce{
			Liens: []NamingLien{{Name: "app/keep-s1", Kind: "Lien", Namespace: "app", LienName: "keep-s1", Mode: "Deny", Reason: "needed by the app",
				Ready: &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMissingPermission, Message: missing}}},
			ControllerUser: "system:serviceaccount:teardown-system:teardown-controller",
			Missing:        []refused.Request{{Verb: "delete", Resource: schema.GroupResource{Resource: "secrets"}, Namespace: "app", Name: "s1"}},
		},
	}
	var text, js bytes.Buffer
	d := Diagnose(f)
	if err := Render(&text, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "not-in-force.golden", text.Bytes())
	if err := RenderJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "not-in-force.json.golden", js.Bytes())
}
