// Package lien is teardown's in-use protection as data: the label,
// annotation and finalizer that the lien controller puts on protected
// objects (and that the ValidatingAdmissionPolicy reads), and helpers for
// operator authors who want an object kept while another exists:
//
//	// Keep the Helm release record until the Foo it belongs to is gone.
//	_, err := lien.Protect(ctx, c, releaseSecret, foo, "release record needed to uninstall the Foo cleanly")
//
// The codec functions work on any metav1.Object and never drop an entry
// they cannot parse: a malformed annotation is an error, not an empty list.
package lien
