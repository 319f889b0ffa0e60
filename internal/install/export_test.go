//go:build integration

package install

// The policy waits, for the tests that run them beside a running
// controller with one policy held back.
var (
	WaitEnforced    = waitEnforced
	WaitNotEnforced = waitNotEnforced
	// WaitOwnerLinksEnforced, for the test of the warnings it draws.
	WaitOwnerLinksEnforced = waitOwnerLinksEnforced
)
