package kit

import (
	"os"
	"testing"
	"time"
)

// The machine's CPU time counts this process's: it grows by at least what
// a busy loop here used.
func TestMachineCPUTimeCountsThisProcess(t *testing.T) {
	before, err := MachineCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	self, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	selfAfter, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	after, err := MachineCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are counted per CPU at 100 Hz: allow one tick each way.
	if used, mine := after-before, selfAfter-self; used+20*time.Millisecond < mine {
		t.Errorf("the machine used %v while this process alone used %v", used, mine)
	}
}
