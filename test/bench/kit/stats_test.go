package kit

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{3, 1, 2}, 50, 2},
		{[]float64{4, 1, 3, 2}, 50, 2.5},
		{[]float64{1, 2, 3, 4, 5}, 0, 1},
		{[]float64{1, 2, 3, 4, 5}, 100, 5},
		{[]float64{1, 2, 3, 4, 5}, 75, 4},
		{[]float64{7}, 99, 7},
	} {
		if got := Percentile(tc.xs, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestTable(t *testing.T) {
	tb := Table{Title: "drain", Header: []string{"arm", "median", "ratio"}}
	tb.Add("teardown", 1500*time.Millisecond, 0.4567)
	tb.Add("kcm", 12.345, math.NaN())
	var b bytes.Buffer
	tb.Write(&b)
	want := "\n#### drain\n\n| arm | median | ratio |\n| --- | --- | --- |\n| teardown | 1.5s | 0.46 |\n| kcm | 12.3 | n/a |\n\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Error(diff)
	}
}
