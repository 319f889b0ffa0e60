// Package cmdutil holds what every teardown command shares: the exit codes
// of the CLI contract, the errors that select them, connecting to a
// cluster with kubectl's flags, the clientsets of a configuration, and the
// -o flag of the commands whose answer has formats.
package cmdutil
