package doctortest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// kubectlAt finds where a kubectl command starts in why's and orphans'
// text: "kubectl " after the start of a line, a space, "(" or "`".
var kubectlAt = regexp.MustCompile("(^|[ (`])kubectl ")

// adviceEnds are what follows a command in the advice's prose.
var adviceEnds = []string{" shows", " removes", " lets", " names it", " (", "; ", ")", " once", " if ", ", ", ": ", " |", "`", "\n"}

// kubectlVerbs are the verbs the advice gives; "kubectl wrote it" is prose.
var kubectlVerbs = []string{"get", "describe", "delete", "label", "annotate", "patch", "taint", "logs", "replace"}

// mutating verbs are run with --dry-run=server: admission and RBAC answer
// as for the real request, and nothing changes.
var mutating = []string{"delete", "label", "annotate", "patch", "taint", "replace"}

// AdviceCommands are the kubectl commands out (the text of why, orphans or
// a condition message) gives, as a person would copy them.
func AdviceCommands(out string) []string {
	var cmds []string
	for _, loc := range kubectlAt.FindAllStringSubmatchIndex(out, -1) {
		rest := out[loc[3]:]
		end := len(rest)
		for _, e := range adviceEnds {
			if i := strings.Index(rest, e); i >= 0 && i < end {
				end = i
			}
		}
		cmd := strings.TrimSpace(rest[:end])
		if verb(cmd) != "" && !slices.Contains(cmds, cmd) {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// verb is the kubectl verb of cmd, "" when cmd is not a kubectl command.
func verb(cmd string) string {
	for _, w := range strings.Fields(cmd)[1:] {
		if strings.HasPrefix(w, "-") {
			continue // --as=..., before the verb
		}
		if slices.Contains(kubectlVerbs, w) {
			return w
		}
		return ""
	}
	return ""
}

// RunAdvice runs each kubectl command in out with kubeconfig, as a person
// would paste it (mutating ones with --dry-run=server), and fails the test
// for any that fails, unless documented says why it must: a prefix of the
// command, and what its output must then contain. Not run: `kubectl logs`
// (the local control plane runs no kubelet, so there are no logs) and the
// end of a pipeline (`... | kubectl replace -f -`, which reads what the
// test of that advice pipes to it).
func RunAdvice(t *testing.T, kubeconfig, out string, documented map[string]string) {
	t.Helper()
	// A discovery cache of its own: ~/.kube/cache is shared with every
	// control plane that ever listened on this port, old CRDs included.
	cache := t.TempDir()
	for _, cmd := range AdviceCommands(out) {
		v := verb(cmd)
		if v == "logs" || strings.HasSuffix(cmd, " -f -") {
			continue
		}
		line := cmd
		if slices.Contains(mutating, v) {
			line += " --dry-run=server"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c := exec.CommandContext(ctx, "bash", "-c", line)
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+cache)
		got, err := c.CombinedOutput()
		cancel()
		want, ok := "", false
		for prefix, w := range documented {
			if strings.HasPrefix(cmd, prefix) {
				want, ok = w, true
			}
		}
		switch {
		case err == nil && ok:
			t.Errorf("advised %q succeeds; the test says it fails with %q", line, want)
		case err != nil && !ok:
			t.Errorf("advised command fails: %s: %v\n%s", line, err, got)
		case err != nil && !strings.Contains(string(got), want):
			t.Errorf("advised %q fails, but not for the documented reason %q: %v\n%s", line, want, err, got)
		default:
			t.Logf("$ %s (advised)\n%s", line, got)
		}
	}
}
