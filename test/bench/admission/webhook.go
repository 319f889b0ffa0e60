package admission

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// WebhookLabel marks the objects the benchmark's webhook protects, so that
// teardown's policy (which matches teardown.dev/lien) never sees them.
const WebhookLabel = "bench.teardown.dev/webhook-lien"

// Webhook is a fail-closed validating webhook that refuses the DELETE of
// every object carrying WebhookLabel, naming its liens: the check
// teardown's deny policy makes, done the Crossplane way, over HTTPS.
type Webhook struct {
	URL      string
	CABundle []byte
	srv      *http.Server
}

// StartWebhook serves the webhook on a free loopback port with a new
// self-signed certificate.
func StartWebhook() (*Webhook, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "teardown-bench-webhook"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", serveValidate)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return &Webhook{
		URL:      fmt.Sprintf("https://%s/validate", l.Addr()),
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		srv:      srv,
	}, nil
}

// Close stops the server.
func (w *Webhook) Close() error { return w.srv.Close() }

func serveValidate(rw http.ResponseWriter, req *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "malformed AdmissionReview", http.StatusBadRequest)
		return
	}
	review.Response = Decide(review.Request)
	review.Request = nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}

// Decide is the webhook's check: refuse the DELETE of a labelled object,
// quoting its liens, allow everything else.
func Decide(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: r.UID, Allowed: true}
	if r.Operation != admissionv1.Delete {
		return resp
	}
	var old metav1.PartialObjectMetadata
	if err := json.Unmarshal(r.OldObject.Raw, &old); err != nil {
		// Fail closed: what cannot be read is not deleted.
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "cannot read the object: " + err.Error()}
		return resp
	}
	if old.Labels[WebhookLabel] != "true" {
		return resp
	}
	liens, ok := old.Annotations[v1alpha1.LiensAnnotation]
	if !ok {
		liens = "(annotation " + v1alpha1.LiensAnnotation + " missing)"
	}
	ns := ""
	if r.Namespace != "" {
		ns = r.Namespace + "/"
	}
	resp.Allowed = false
	resp.Result = &metav1.Status{
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("deletion of %s %s%s is refused: it is protected by lien(s) %s; it can be deleted once the lien is released", r.Resource.Resource, ns, r.Name, liens),
	}
	return resp
}
