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

// gcLine matches a GODEBUG=gctrace=1 line: the heap at the start of the
// cycle, at its end, and live (marked) after it, in MiB, after a
// "GC forced" line when the runtime forced it (its two-minute periodic
// collection).
var gcLine = regexp.MustCompile(`(?m)^(GC forced\n)?gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// GC is one garbage collection in a GODEBUG=gctrace=1 log.
type GC struct {
	Live   int64 // bytes marked live
	Forced bool  // the runtime's periodic collection, not a heap goal reached
}

// GCs are the garbage collections a GODEBUG=gctrace=1 log records, in order.
func GCs(log []byte) []GC {
	var out []GC
	for _, m := range gcLine.FindAllSubmatch(log, -1) {
		mb, err := strconv.ParseInt(string(m[4]), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, GC{Live: mb << 20, Forced: len(m[1]) > 0})
	}
	return out
}
