// Package cmdutil holds what every teardown command shares: the exit codes
// of the CLI contract, the errors that select them, and connecting to a
// cluster with kubectl's flags.
package cmdutil
