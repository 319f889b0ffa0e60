// Package run is `teardown run -f PLAN.yaml`: it runs a Teardown plan now,
// from the command line, with a live progress display, and exits 0 when the
// plan succeeded or 1 with what is pending. It fits a Helm pre-delete hook
// Job. A plan whose Teardown exists in the cluster and is Running or
// Failed is handed to the controller (resumed with --from-step) and
// followed; any other plan runs in this process.
package run
