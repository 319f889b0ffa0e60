package localcluster

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Temporary cluster directories are named tempPrefix* and hold ownerFile,
// the PID of the process that started them.
const (
	tempPrefix = "teardown-localcluster-"
	ownerFile  = "owner.pid"
)

var (
	liveMu   sync.Mutex
	live     = map[*Cluster]struct{}{}
	handlers sync.Once
)

// track registers c to be stopped if this process gets SIGINT or SIGTERM.
// The kernel already kills the components if the process dies any other way
// (PR_SET_PDEATHSIG); the signal handler also removes the directory.
func track(c *Cluster) {
	liveMu.Lock()
	live[c] = struct{}{}
	liveMu.Unlock()
	handlers.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			stopAll()
			// Die of the signal as the process would have without us.
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	})
}

func untrack(c *Cluster) {
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
}

func stopAll() {
	liveMu.Lock()
	cs := make([]*Cluster, 0, len(live))
	for c := range live {
		cs = append(cs, c)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Stop() })
	}
	wg.Wait()
}

// sweepAbandoned removes temporary cluster directories whose owning process
// is gone (it was killed with SIGKILL, so it could not clean up), after
// making sure none of their components still runs.
func sweepAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		if c, err := Attach(dir); err == nil && c.Stop() != nil {
			continue // something would not die: leave its directory for a person to look at
		}
		_ = os.RemoveAll(dir)
	}
}
