// Package peers compares `teardown why`/`orphans` with the tools people
// reach for on a stuck deletion (knsk, kor, kubectl-check-ownerreferences,
// finalizer-doctor) on the cases of the corpus
// (internal/cli/why/corpus_test.go), outside `make test`:
//
//   - Peers names each tool by its Go module and an exact version; Build
//     fetches it through the go command (the Go module proxy only) and
//     builds it in its own module, never linked into ours, or records why it
//     could not be had.
//   - The corpus test, run with TEARDOWN_PEERS set to a directory
//     (`make peers`), reproduces each case as it always does and runs
//     teardown and every built peer on it; Record keeps each raw answer in
//     that directory (docs/peers), so that the table can be checked.
//   - Classify judges an answer by the rules written here (see Classify),
//     against what each case declares in Cases: the names that make its
//     cause, the finalizers that must not be removed, the claims that are
//     wrong. Nothing in the table is written by hand: Table renders the
//     verdicts of the recorded answers.
package peers
