package chaos

import (
	"testing"

	"github.com/baton-rt/baton/internal/natsproc"
)

// startNATS starts three real nats-server processes (internal/natsproc):
// a killed node leaves no goodbye and hands no leadership over.
func startNATS(t *testing.T) cluster {
	return natsproc.Start(t, t.TempDir(), 3)
}
