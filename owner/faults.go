package owner

import (
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/baton-rt/baton/internal/app"
)

// faultUsage documents --fault. It is for crash tests only: each point
// SIGKILLs the process itself the Nth time it is reached (N defaults to 1).
const faultUsage = "TEST ONLY — never in production: SIGKILL this process at a fault point, comma-separated: " +
	"crash-after-commit:N (right after the Nth commit CAS succeeded, before its events are published), " +
	"crash-after-index:N (after the Nth recovery/wake/takeover index write, before the claim), " +
	"crash-after-claim:N (after the Nth recovery/wake/takeover claim CAS, before the consumer is created), " +
	"crash-after-journal:N (right after the Nth journal entry of a step was written, before StepInput.Do returns), " +
	"crash-before-commit:N (when the Nth step result reached its session, before the commit that folds it), " +
	"crash-before-collect:N (after the Nth commit that no longer refers to some blobs, before they are deleted), " +
	"crash-before-index-write:N (before the Nth write of a session's entry of the session index, after the record change it follows)"

// parseFaults turns a --fault spec into armed failpoints; "" is nil.
func parseFaults(spec string, log *slog.Logger) (*failpoint.Registry, error) {
	if spec == "" {
		return nil, nil
	}
	f := failpoint.New()
	for _, part := range strings.Split(spec, ",") {
		name, arg, hasArg := strings.Cut(strings.TrimSpace(part), ":")
		n := 1
		if hasArg {
			v, err := strconv.Atoi(arg)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("%w: --fault %q: N must be a positive integer", app.ErrUsage, part)
			}
			n = v
		}
		point, ok := crashPoints[name]
		if !ok {
			return nil, fmt.Errorf("%w: --fault %q: unknown fault point (crash-after-commit, crash-after-index, crash-after-claim, crash-after-journal, crash-before-commit, crash-before-collect, crash-before-index-write)", app.ErrUsage, name)
		}
		f.On(point, killAt(name, n, log))
	}
	return f, nil
}

// crashPoints are the failpoints --fault kills the process at, by name.
var crashPoints = map[string]failpoint.Name{
	"crash-after-commit":       failpoint.AfterCommit,
	"crash-after-index":        failpoint.AfterIndex,
	"crash-after-claim":        failpoint.AfterClaim,
	"crash-after-journal":      failpoint.AfterJournal,
	"crash-before-commit":      failpoint.BeforeCommit,
	"crash-before-collect":     failpoint.BeforeCollect,
	"crash-before-index-write": failpoint.BeforeIndexWrite,
}

// killAt returns an action that SIGKILLs the process the nth time it runs.
func killAt(name string, n int, log *slog.Logger) failpoint.Action {
	var count atomic.Int64
	return func(a failpoint.Args) error {
		if count.Add(1) != int64(n) {
			return nil
		}
		log.Warn("fault injected: killing this process", "fault", name, "n", n, app.KeySession, a.SessionID)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns: the signal is on its way
	}
}
