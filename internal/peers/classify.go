package peers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Answer is one tool's recorded answer on one case.
type Answer struct {
	Tool string
	// Command is the command line as run (the kubeconfig's path replaced
	// by KUBECONFIG).
	Command string
	Exit    int
	// Output is what it printed, stdout then stderr, timestamps normalized.
	Output string
}

// Verdict is what the rules made of an answer.
type Verdict struct {
	// Named: the answer names every part of the case's cause.
	Named bool
	// Unnamed are the cause's parts it does not name (each by its first
	// name).
	Unnamed []string
	// Unsafe are the unsafe actions it advises or would run, each said
	// once.
	Unsafe []string
	// Wrong are the claims it makes that the case's facts contradict.
	Wrong []string
}

// Cell is the verdict in the table's words: "named", "nothing found",
// with ", wrong" or ", unsafe" after it when so.
func (v Verdict) Cell() string {
	s := "nothing found"
	if v.Named {
		s = "named"
	}
	if len(v.Wrong) > 0 {
		s += ", wrong"
	}
	if len(v.Unsafe) > 0 {
		s += ", unsafe"
	}
	return s
}

// The removal commands the rules recognise. Only commands count: advice
// in prose ("do not remove it") is never read as an action.
var (
	// A JSON patch whose test operation names the finalizer it removes
	// (teardown's form).
	testedRemoval = regexp.MustCompile(`"op"\s*:\s*"test"\s*,\s*"path"\s*:\s*"/metadata/finalizers/\d+"\s*,\s*"value"\s*:\s*"([^"]+)"`)
	// jq removing one entry before the finalize subresource.
	namedFinalize = regexp.MustCompile(`\.spec\.finalizers\s*-=\s*\[\s*"([^"]+)"\s*\]`)
	// Removing every finalizer at once: a JSON patch removing the list, a
	// merge patch emptying it.
	allRemoved = regexp.MustCompile(`"op"\s*:\s*"remove"\s*,\s*"path"\s*:\s*"/metadata/finalizers"\s*}|"finalizers"\s*:\s*(null|\[\s*\])`)
	// The namespace finalize subresource: it rewrites spec.finalizers.
	finalize = regexp.MustCompile(`/namespaces/[^/\s]+/finalize\b`)
	// finalizer-doctor's mutation flag: it clears the finalizers it
	// diagnosed.
	applyFlag = regexp.MustCompile(`\bfinalizer-doctor\b.*\s--apply\b`)
	// A force delete (no grace period: the object goes from the API
	// without its kubelet's confirmation).
	forceDelete = regexp.MustCompile(`\bdelete\b.*(--force\b|--grace-period=0)|(--force\b|--grace-period=0).*\bdelete\b`)
	// What makes a force delete of a pod on a dead node safe: the node
	// confirmed gone, or tainted out-of-service, first.
	nodeConfirmed = regexp.MustCompile(`(?i)out-of-service|(confirm|sure)\b.*\b(node|machine)\b`)
)

// Classify judges a on c by these rules, which the table's legend repeats:
//
//  1. named: for every group of c.Cause, one of its names appears in the
//     answer as a whole name (not inside a longer one: "longhorn.io" is
//     not named by "replica.longhorn.io/x").
//  2. unsafe: a command in the answer removes a finalizer of c.Keep (named
//     by a JSON patch's test value or a `.spec.finalizers -= [...]`), or
//     removes every finalizer at once (a JSON patch removing
//     /metadata/finalizers, a merge patch setting it to null or [], the
//     namespace finalize subresource without a named entry,
//     finalizer-doctor's --apply) while c.Keep is not empty; or, on a
//     case of a pod on a dead node, a force delete that nothing before it
//     conditions on the node being confirmed gone or tainted
//     out-of-service.
//  3. wrong: the answer makes one of c.Wrong's claims, or claims that
//     nothing holds (teardown's exit code 0, in every case; a peer's
//     all-clear where its own checks cover the case: Peer.Clean) while
//     something does (every case holds something).
//
// An answer that does not name the cause is "nothing found", whatever
// else it says; wrong and unsafe are reported beside named or nothing
// found.
func Classify(c Case, clean func(c Case, exit int, out string) bool, a Answer) Verdict {
	var v Verdict
	for _, group := range c.Cause {
		if !slices.ContainsFunc(group, func(name string) bool { return containsName(a.Output, name) }) {
			v.Unnamed = append(v.Unnamed, group[0])
		}
	}
	v.Named = len(c.Cause) > 0 && len(v.Unnamed) == 0
	v.Unsafe = unsafeActions(c, a.Output)
	for _, w := range c.Wrong {
		if regexp.MustCompile(`(?i)` + w).MatchString(a.Output) {
			v.Wrong = append(v.Wrong, fmt.Sprintf("says %q", w))
		}
	}
	if clean != nil && clean(c, a.Exit, a.Output) {
		v.Wrong = append(v.Wrong, "says nothing holds")
	}
	return v
}

// unsafeActions are rule 2's findings in out.
func unsafeActions(c Case, out string) []string {
	var found []string
	add := func(s string) {
		if !slices.Contains(found, s) {
			found = append(found, s)
		}
	}
	before := ""
	for line := range strings.SplitSeq(out, "\n") {
		var named []string
		for _, m := range testedRemoval.FindAllStringSubmatch(line, -1) {
			named = append(named, m[1])
		}
		for _, m := range namedFinalize.FindAllStringSubmatch(line, -1) {
			named = append(named, m[1])
		}
		for _, f := range named {
			if slices.Contains(c.Keep, f) {
				add("removes finalizer " + f)
			}
		}
		all := allRemoved.MatchString(line) || applyFlag.MatchString(line) ||
			(finalize.MatchString(line) && !namedFinalize.MatchString(line))
		if all && len(named) == 0 && len(c.Keep) > 0 {
			add("removes every finalizer, " + strings.Join(c.Keep, ", ") + " included")
		}
		if c.DeadNode && forceDelete.MatchString(line) {
			i := forceDelete.FindStringIndex(line)[0]
			if !nodeConfirmed.MatchString(before + line[:i]) {
				add("force deletes before the node is confirmed gone")
			}
		}
		before += line + "\n"
	}
	return found
}

// containsName tells whether name occurs in s as a whole name: neither
// preceded nor followed by a character that names are made of (a letter,
// a digit, '-', '_', '.'; a '.' that ends a sentence does not count).
func containsName(s, name string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameChar(s[start-1])) && !continues(s, end) {
			return true
		}
		i = start + 1
	}
}

// continues tells whether the name ending at end goes on.
func continues(s string, end int) bool {
	if end >= len(s) {
		return false
	}
	if s[end] == '.' {
		return end+1 < len(s) && nameChar(s[end+1]) && s[end+1] != '.'
	}
	return nameChar(s[end])
}

func nameChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.'
}
