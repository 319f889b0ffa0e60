// Package docs runs the command sequences of the README and docs/ as a new
// user types them: the shell blocks are read from the markdown files
// themselves, so a command changed in the docs is the command tested.
package docs
