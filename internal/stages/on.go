//go:build batonstages

package stages

import (
	"io"
	"time"
)

// Enabled reports whether this build records stages (the batonstages tag).
const Enabled = true

var global = newRecorder(time.Now)

// Start begins a delivery's cycle for key (a session ID), closing the one
// before.
func Start(key string) { global.start(key) }

// Mark records the first time key's current cycle reaches stage.
func Mark(key, stage string) { global.mark(key, stage) }

// Reset drops every recorded cycle.
func Reset() { global.reset() }

// Report prints the median time of each stage since the one before.
func Report(w io.Writer, title string) { global.report(w, title) }
