package localcluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRoute(t *testing.T) {
	services := []corev1.Service{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "hooks", Name: "guard"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.0.0.12", ClusterIPs: []string{"10.0.0.12"}, Ports: []corev1.ServicePort{{Port: 443}, {Port: 8443}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "hooks", Name: "outside"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "webhook.example.com", Ports: []corev1.ServicePort{{Port: 443}}},
		},
	}
	served := map[string]ServedService{
		"hooks/guard:443": {Namespace: "hooks", Name: "guard", Port: 443, Addr: "127.0.0.1:9443"},
	}
	for _, tc := range []struct {
		dest, addr, service, err string
	}{
		{dest: "10.0.0.12:443", addr: "127.0.0.1:9443", service: "hooks/guard:443"},
		{dest: "127.0.0.1:6443", addr: "127.0.0.1:6443"},
		{dest: "[::1]:6443", addr: "[::1]:6443"},
		{dest: "localhost:6443", addr: "localhost:6443"},
		{dest: "10.0.0.12:8443", service: "hooks/guard:8443", err: "no local server for Service hooks/guard port 8443"},
		{dest: "10.0.0.12:80", service: "hooks/guard:80", err: "Service hooks/guard has no port 80"},
		{dest: "webhook.example.com:443", service: "hooks/outside:443", err: "no local server for Service hooks/outside port 443"},
		{dest: "10.0.0.99:443", err: "10.0.0.99:443 is neither loopback nor a Service's address"},
		{dest: "192.0.2.1:443", err: "192.0.2.1:443 is neither loopback nor a Service's address"},
		{dest: "metadata.internal:80", err: "metadata.internal:80 is neither loopback nor a Service's address"},
		{dest: "10.0.0.12", err: `"10.0.0.12" is not host:port`},
	} {
		t.Run(tc.dest, func(t *testing.T) {
			addr, service, err := route(tc.dest, services, served)
			if addr != tc.addr || service != tc.service {
				t.Errorf("route(%s) = %q, %q; want %q, %q", tc.dest, addr, service, tc.addr, tc.service)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("route(%s) error = %v, want one containing %q", tc.dest, err, tc.err)
			}
		})
	}
}

func TestParseServedService(t *testing.T) {
	s, err := ParseServedService("hooks/guard:443=127.0.0.1:9443")
	if err != nil {
		t.Fatal(err)
	}
	if want := (ServedService{Namespace: "hooks", Name: "guard", Port: 443, Addr: "127.0.0.1:9443"}); s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if err := s.validate(); err != nil {
		t.Error(err)
	}
	for in, want := range map[string]string{
		"hooks/guard=127.0.0.1:9443":      "want NAMESPACE/NAME:PORT=ADDR",
		"guard:443=127.0.0.1:9443":        "want NAMESPACE/NAME:PORT=ADDR",
		"hooks/guard:https=127.0.0.1:1":   `port "https" is not a number`,
		"hooks/guard:443":                 "want NAMESPACE/NAME:PORT=ADDR",
		"hooks/guard:443=10.1.2.3:9443":   "is not on loopback",
		"hooks/guard:443=127.0.0.1":       "missing port",
		"hooks/guard:70000=127.0.0.1:943": "port 70000 is not between 1 and 65535",
	} {
		s, err := ParseServedService(in)
		if err == nil {
			err = s.validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", in, err, want)
		}
	}
}

func TestEgressSelectorConfigSendsClusterAndControlPlaneToTheProxy(t *testing.T) {
	got := string(egressSelectorConfig("/tmp/x/egress.sock"))
	for _, want := range []string{
		"kind: EgressSelectorConfiguration",
		"- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n        udsName: \"/tmp/x/egress.sock\"\n",
		"- name: controlplane\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("egress selector configuration lacks %q:\n%s", want, got)
		}
	}
}
