// Package nsdelete measures namespace deletion with liens: time from the
// DELETE of a namespace holding many objects to the namespace gone,
// without liens and with liens (held by an object outside the namespace)
// released mid-way, where teardown's nudge must keep the namespace
// controller from backing off. Run it with `make bench`.
package nsdelete
