package backoff

import (
	"testing"
	"time"
)

// TestRetriesWaitAtMostMax: after a long run of failures (a minute of
// refusals is about 14), the next try is at most Max away, and a success
// starts again from the shortest wait.
func TestRetriesWaitAtMostMax(t *testing.T) {
	rl := RateLimiter[string]()
	var longest time.Duration
	for range 100 {
		longest = max(longest, rl.When("plan"))
	}
	if longest != Max {
		t.Errorf("after 100 failures the longest wait is %s, want %s", longest, Max)
	}
	rl.Forget("plan")
	if d := rl.When("plan"); d != 5*time.Millisecond {
		t.Errorf("after a success the first wait is %s, want 5ms", d)
	}
}
