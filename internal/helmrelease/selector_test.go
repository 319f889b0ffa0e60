package helmrelease

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestSelectorSelectsTheReleasesRecordsOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels labels.Set
		want   bool
	}{
		{"a record of the release", labels.Set{"owner": "helm", "name": "op", "status": "deployed", "version": "3"}, true},
		{"a record of another release", labels.Set{"owner": "helm", "name": "op2", "status": "deployed", "version": "1"}, false},
		{"not Helm's", labels.Set{"name": "op"}, false},
		{"another owner", labels.Set{"owner": "flux", "name": "op"}, false},
	} {
		if got := Selector("op").Matches(tc.labels); got != tc.want {
			t.Errorf("%s: Selector(op).Matches(%v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if got, want := ListOptions("op").LabelSelector, "name=op,owner=helm"; got != want {
		t.Errorf("ListOptions(op).LabelSelector = %q, want %q", got, want)
	}
}
