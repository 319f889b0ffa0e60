package why

import "testing"

// TestHelmReleaseArg: helm/NAME and helm NAME name a Helm release; any
// other argument is left to the resource builder.
func TestHelmReleaseArg(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		release string
		ok      bool
	}{
		{[]string{"helm/myfoo"}, "myfoo", true},
		{[]string{"helm", "myfoo"}, "myfoo", true},
		{[]string{"helmrelease/myfoo"}, "", false},
		{[]string{"secret/helm"}, "", false},
		{[]string{"helm"}, "", false},
		{[]string{"secret", "helm"}, "", false},
	} {
		release, ok := helmReleaseArg(tt.args)
		if release != tt.release || ok != tt.ok {
			t.Errorf("helmReleaseArg(%q) = %q, %v; want %q, %v", tt.args, release, ok, tt.release, tt.ok)
		}
	}
}
