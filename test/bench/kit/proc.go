package kit

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// CPUTime is the user+system CPU time process pid has used, from /proc.
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading cpu time of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from after ")".
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading cpu time of pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("reading cpu time of pid %d: malformed stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading cpu time of pid %d: malformed stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// MachineCPUTime is the CPU time every process on the machine has used
// since boot (user, nice, system, irq and softirq in /proc/stat), summed
// over its CPUs.
func MachineCPUTime() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat: %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system (idle iowait) irq softirq
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat: %q", line)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// RSS is the resident set size of process pid in bytes (VmRSS).
func RSS(pid int) (int64, error) {
	return statusKB(pid, "VmRSS:")
}

// PeakRSS is the peak resident set size of process pid in bytes (VmHWM).
func PeakRSS(pid int) (int64, error) {
	return statusKB(pid, "VmHWM:")
}

func statusKB(pid int, key string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				break
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("reading memory of pid %d: no %s in status", pid, key)
}
