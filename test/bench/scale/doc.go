// Package scale measures the lien controller at scale: many liens
// protecting many objects across namespaces and kinds, at two sizes side
// by side (the second a tenth of the first in liens and objects, the same
// namespaces and kinds), each on a control plane of its own. It reports
// the WATCH requests the controller holds on kube-apiserver, its
// goroutines and resident memory, and the time from a lien's creation to
// the first refused DELETE of the object it protects, idle and while one
// namespace churns. Run it with `make bench`; docs/benchmarks.md, section
// 7, says what the figures mean.
package scale
