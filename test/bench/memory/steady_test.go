package memory

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSteady(t *testing.T) {
	series := func(rss ...int64) []Sample {
		out := make([]Sample, len(rss))
		for i, r := range rss {
			out[i] = Sample{T: time.Duration(i) * time.Second, RSS: r}
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		samples    []Sample
		n          int
		wantRSS    int64
		wantSteady bool
	}{
		{"too few samples", series(100, 100), 3, 0, false},
		{"still growing", series(10, 50, 90, 100, 130), 3, 100, false},
		{"settled within 2%", series(10, 50, 100, 101, 99), 3, 100, true},
		{"even window takes the middle two", series(500, 100, 102, 101, 100), 4, 100, true},
		{"a drop counts as movement", series(100, 100, 100, 80), 3, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rss, steady := Steady(tc.samples, tc.n, 0.02)
			if rss != tc.wantRSS || steady != tc.wantSteady {
				t.Errorf("Steady = %d, %v; want %d, %v", rss, steady, tc.wantRSS, tc.wantSteady)
			}
		})
	}
}

func TestGCs(t *testing.T) {
	log := []byte(`I0101 00:00:00.000000 1 garbagecollector.go:166] "Garbage collector: all resource monitors have synced"
gc 1 @0.011s 3%: 0.010+1.2+0.003 ms clock, 0.021+0.30/0.85/0+0.007 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
{"level":"info","msg":"Starting workers"}
gc 2 @0.5s 1%: 0.020+2.0+0.004 ms clock, 0.040+0.1/1.5/0+0.008 ms cpu, 40->41->23 MB, 42 MB goal, 0 MB stacks, 1 MB globals, 2 P
GC forced
gc 3 @121.5s 0%: 0.020+2.0+0.004 ms clock, 0.040+0.1/1.5/0+0.008 ms cpu, 30->30->21 MB, 46 MB goal, 0 MB stacks, 1 MB globals, 2 P
`)
	want := []GC{{Live: 1 << 20}, {Live: 23 << 20}, {Live: 21 << 20, Forced: true}}
	if diff := cmp.Diff(want, GCs(log)); diff != "" {
		t.Error(diff)
	}
	if got := GCs([]byte("no collection yet\n")); len(got) != 0 {
		t.Errorf("GCs found %v in a log without a collection", got)
	}
}
