// Package security holds teardown's threat model as tests: every row of
// docs/security.md is a real request of an unprivileged identity (a
// ServiceAccount with a narrow Role, the built-in edit role, or */status
// rights, by impersonation) against the installed policies and the running
// controllers on the local control plane, and asserts that it is refused or
// repaired, with a message that says why.
package security
