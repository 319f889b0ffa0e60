package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecide(t *testing.T) {
	labelled := []byte(`{"metadata":{"name":"x","labels":{"` + WebhookLabel + `":"true"},"annotations":{"teardown.dev/liens":"[{\"lien\":\"ns/keep\",\"reason\":\"r\"}]"}}}`)
	plain := []byte(`{"metadata":{"name":"x"}}`)
	for _, tc := range []struct {
		name    string
		op      admissionv1.Operation
		old     []byte
		allowed bool
		message string
	}{
		{"protected delete", admissionv1.Delete, labelled, false, `deletion of configmaps ns/x is refused: it is protected by lien(s) [{"lien":"ns/keep","reason":"r"}]; it can be deleted once the lien is released`},
		{"unprotected delete", admissionv1.Delete, plain, true, ""},
		{"update of a protected object", admissionv1.Update, labelled, true, ""},
		{"unreadable object fails closed", admissionv1.Delete, []byte(`{`), false, "cannot read the object: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Decide(&admissionv1.AdmissionRequest{
				UID: "u", Operation: tc.op, Namespace: "ns", Name: "x",
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				OldObject: runtime.RawExtension{Raw: tc.old},
			})
			if r.Allowed != tc.allowed || r.UID != "u" {
				t.Fatalf("allowed = %v (uid %q), want %v", r.Allowed, r.UID, tc.allowed)
			}
			if !tc.allowed && r.Result.Message != tc.message {
				t.Errorf("message = %q, want %q", r.Result.Message, tc.message)
			}
		})
	}
}
