package cli

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// kubectlRows counts the objects `kubectl get` printed: one line each, less
// the header every resource's table starts with (NAME, or LAST SEEN for
// events).
func kubectlRows(out string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || isHeader(line) {
			continue
		}
		n++
	}
	return n
}

func isHeader(line string) bool {
	for _, h := range []string{"NAME", "LAST SEEN"} {
		if line == h || strings.HasPrefix(line, h+" ") {
			return true
		}
	}
	return false
}

// whyContent is the size of the namespace's content as `teardown why`
// reported it ("N objects of K kinds ..."), false when its answer has no
// content finding.
func whyContent(out string) (objects, kinds int, ok bool) {
	m := whyContentRE.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, false
	}
	objects, _ = strconv.Atoi(m[1])
	kinds, _ = strconv.Atoi(m[2])
	return objects, kinds, true
}

var whyContentRE = regexp.MustCompile(`\] (\d+) objects? of (\d+) kinds? `)

// byVerb sums calls up per verb, with the number of resources each verb
// touched, discovery apart: "discovery 3, list 77 (66 resources), get 2".
func byVerb(calls []kit.Call) string {
	n := map[string]int{}
	resources := map[string]map[string]bool{}
	var verbs []string
	for _, c := range calls {
		v := c.Verb
		if c.Resource == "" {
			v = "discovery"
		}
		if n[v] == 0 {
			verbs = append(verbs, v)
			resources[v] = map[string]bool{}
		}
		n[v]++
		resources[v][c.Resource] = true
	}
	slices.Sort(verbs)
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = fmt.Sprintf("%s %d", v, n[v])
		if r := len(resources[v]); v != "discovery" && r > 1 {
			out[i] += fmt.Sprintf(" (%d resources)", r)
		}
	}
	return strings.Join(out, ", ")
}
