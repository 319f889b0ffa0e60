// Package testenv stands for internal/testenv.
package testenv
