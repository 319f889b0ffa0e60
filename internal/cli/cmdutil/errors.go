package cmdutil

import (
	"errors"
	"fmt"
)

// Exit codes, as the CLI contract in DESIGN.md fixes them.
const (
	ExitOK          = 0 // done, nothing to report
	ExitFinding     = 1 // a finding: something is blocked, orphaned or would be refused
	ExitUsage       = 2 // the command line is wrong
	ExitUnreachable = 3 // the cluster cannot be reached
)

// UsageError is a wrong command line: unknown verb or flag, bad argument.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// UnreachableError is a cluster that did not answer, or no cluster to ask.
type UnreachableError struct {
	Server string // empty when no kubeconfig named one
	Err    error
}

func (e *UnreachableError) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("cannot reach the cluster: %v", e.Err)
	}
	return fmt.Sprintf("cannot reach the cluster at %s: %v", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// FindingError is the command's answer itself, reported with exit code 1:
// for example an object that something blocks. The command has already
// printed the details; Error is the one-line summary.
type FindingError struct{ Summary string }

func (e *FindingError) Error() string { return e.Summary }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var usage *UsageError
	var unreachable *UnreachableError
	var finding *FindingError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &unreachable):
		return ExitUnreachable
	case errors.As(err, &finding):
		return ExitFinding
	default:
		return ExitFinding
	}
}

// Plural counts n things: "1 orphan found", "3 orphans found".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
