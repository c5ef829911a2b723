// Package inproc runs runtime/pool's Owner in the test's process, on the
// harness: its own connection and store, the demo agent by default, logs
// into the test's log, stopped when the test ends. It is the one piece of
// the harness that imports an owner-side package, kept apart so that
// package harness does not (the owner packages' internal tests use that).
package inproc
