// Package lien is the lien controller: it keeps the lien label, annotation
// and finalizer (pkg/lien) on the objects that Liens and ClusterLiens
// protect, in step with their holders, and releases them, by UID, once every
// holder is gone. Enforcement itself is not here: kube-apiserver's
// ValidatingAdmissionPolicy refuses the DELETE, so protection holds while
// this controller is down.
//
// Every decision to protect or release is made on a live read; the cache
// only delivers events. Holders' and targets' kinds are watched, metadata
// only, from the moment a lien first names them, CRDs installed later
// included.
package lien
