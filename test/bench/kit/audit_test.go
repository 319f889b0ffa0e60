package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuditPolicies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   func(string) ([]string, *Audit, error)
		ignored string
	}{
		{"AuditFlags", AuditFlags, `["/healthz*", "/readyz*", "/livez*", "/metrics", "/version", "/api", "/api/*", "/apis", "/apis/*", "/openapi/*"]`},
		{"AuditFlagsWithDiscovery", AuditFlagsWithDiscovery, `["/healthz*", "/readyz*", "/livez*", "/metrics"]`},
	} {
		dir := t.TempDir()
		flags, a, err := tc.flags(dir)
		if err != nil {
			t.Fatal(err)
		}
		policy, err := os.ReadFile(filepath.Join(dir, "audit-policy.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "  nonResourceURLs: " + tc.ignored + "\n"; !strings.Contains(string(policy), want) {
			t.Errorf("%s: policy lacks %q:\n%s", tc.name, want, policy)
		}
		if a.Path != filepath.Join(dir, "audit.log") || !strings.Contains(strings.Join(flags, " "), "--audit-log-path="+a.Path) {
			t.Errorf("%s: flags %v do not log to %s", tc.name, flags, a.Path)
		}
	}
}
