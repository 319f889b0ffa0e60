// Package contract ties teardown's contract, as declared in Go, to the
// places that spell it out again: its tests fail when the YAML of the
// policies, the kustomize config or the Helm chart uses a teardown.dev/ key
// that api/v1alpha1/well_known.go does not declare, and when the Teardown
// CRD's validation rules (CEL, run by kube-apiserver) and pkg/teardown's
// Validate disagree on a plan of pkg/teardown/testdata/invalid.txt.
// It holds no production code.
package contract
