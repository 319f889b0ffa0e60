// Package e2e holds scenarios run end to end against the local control
// plane: the problems teardown exists for, replayed as `teardown demo`
// replays them, with their outcome asserted. Build tag: integration.
package e2e
