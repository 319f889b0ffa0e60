//go:build integration

package localcluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teardown-dev/teardown/localcluster"
)

// helperEnv makes the test binary start a cluster, print helperReport as one
// JSON line, and wait to be signalled: a process to interrupt or kill.
const helperEnv = "LOCALCLUSTER_TEST_HELPER"

type helperReport struct {
	Dir    string `json:"dir"`
	PIDs   []int  `json:"pids"`
	Server string `json:"server"`
}

func runHelper() int {
	c, err := localcluster.Start(context.Background(), localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(helperReport{Dir: c.Dir(), PIDs: c.PIDs(), Server: c.RESTConfig().Host})
	select {} // until a signal ends the process
}

// startHelper runs a cluster in a child test process and returns it with
// what that cluster reported.
func startHelper(t *testing.T) (*exec.Cmd, helperReport) {
	t.Helper()
	cmd, line := startChild(t, helperEnv+"=1", "helper cluster")
	var r helperReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.PIDs) != 4 {
		t.Fatalf("helper reported pids %v, want 4 (etcd, egress proxy, kube-apiserver, kube-controller-manager)", r.PIDs)
	}
	return cmd, r
}

// startChild runs this test binary again with env added, running no test
// (TestMain sees env and plays its part), and returns it with the first
// line it prints.
func startChild(t *testing.T, env, what string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("%s did not start: %v", what, err)
	}
	return cmd, strings.TrimSpace(line)
}

// assertNothingLeft checks that no component runs, the API server's port
// is free again and, if dirGone, the cluster directory is removed.
func assertNothingLeft(t *testing.T, r helperReport, dirGone bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range r.PIDs {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after stop (kill -0: %v)", pid, err)
		}
	}
	u, err := url.Parse(r.Server)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Errorf("API server port %s still taken: %v", u.Host, err)
	} else {
		l.Close()
	}
	_, err = os.Stat(r.Dir)
	if dirGone && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s left behind (stat: %v)", r.Dir, err)
	}
}

func TestInterruptStopsEverything(t *testing.T) {
	cmd, r := startHelper(t)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Errorf("helper should die of SIGINT after cleaning up, got %v", err)
	}
	assertNothingLeft(t, r, true)
}

func TestKilledOwnerTakesComponentsAlongAndNextStartSweeps(t *testing.T) {
	cmd, r := startHelper(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertNothingLeft(t, r, false) // SIGKILL leaves no chance to remove the directory...

	// ...so the next Start removes it.
	c, err := localcluster.Start(t.Context(), localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := os.Stat(r.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("abandoned directory %s not swept (stat: %v)", r.Dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, helperReport{Dir: c.Dir(), PIDs: c.PIDs(), Server: c.RESTConfig().Host}, true)
}
