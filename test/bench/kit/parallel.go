package kit

import (
	"sync"
	"testing"
)

// Parallel runs f(0..n-1) on workers goroutines, the way a driver creates
// or deletes many objects at once, and fails tb with every error.
func Parallel(tb testing.TB, workers, n int, f func(i int) error) {
	tb.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Error(err)
	}
	if tb.Failed() {
		tb.FailNow()
	}
}
