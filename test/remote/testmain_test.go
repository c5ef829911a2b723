package remote_test

import (
	"os"
	"testing"

	"github.com/baton-rt/baton/internal/proctest"
)

// TestMain removes the binaries the tests linked (proctest.Main).
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
