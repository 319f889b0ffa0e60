package cli

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// kubectlRows counts the objects `kubectl get` printed: one line each, less
// the NAME header every resource's table starts with.
func kubectlRows(out string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "NAME ") || line == "NAME" {
			continue
		}
		n++
	}
	return n
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
