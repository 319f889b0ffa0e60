package memory

import (
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Sample is a process's resident set size at a time since it started.
type Sample struct {
	T   time.Duration
	RSS int64
}

// Steady reports whether the last n samples lie within tol (a fraction of
// their median) of each other, and their median: the resident set a
// process settled at once its caches were filled.
func Steady(samples []Sample, n int, tol float64) (int64, bool) {
	if n <= 0 || len(samples) < n {
		return 0, false
	}
	last := make([]int64, 0, n)
	for _, s := range samples[len(samples)-n:] {
		last = append(last, s.RSS)
	}
	slices.Sort(last)
	median := last[n/2]
	if n%2 == 0 {
		median = (last[n/2-1] + last[n/2]) / 2
	}
	return median, float64(last[n-1]-last[0]) <= tol*float64(median)
}

// gcLine matches the heap sizes of a GODEBUG=gctrace=1 line: at the
// start of the cycle, at its end, and live (marked) after it, in MiB.
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// LiveHeap is the live heap the last garbage collection in a
// GODEBUG=gctrace=1 log found, in bytes, and whether the log has one.
func LiveHeap(log []byte) (int64, bool) {
	all := gcLine.FindAllSubmatch(log, -1)
	if len(all) == 0 {
		return 0, false
	}
	mb, err := strconv.ParseInt(string(all[len(all)-1][3]), 10, 64)
	if err != nil {
		return 0, false
	}
	return mb << 20, true
}
