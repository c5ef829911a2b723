//go:build !batonstages

package stages

import "io"

// Enabled reports whether this build records stages (the batonstages tag).
const Enabled = false

// Start begins a delivery's cycle for key (a session ID).
func Start(string) {}

// Mark records the first time key's current cycle reaches stage.
func Mark(string, string) {}

// Reset drops every recorded cycle.
func Reset() {}

// Report prints the median time of each stage since the one before.
func Report(io.Writer, string) {}
