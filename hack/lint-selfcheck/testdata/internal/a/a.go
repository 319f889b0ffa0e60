// Package a imports nothing.
package a
