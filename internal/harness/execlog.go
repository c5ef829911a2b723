package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/wire"
)

// ExecLogPath is process's execution log (the owner's --exec-log) in dir.
func ExecLogPath(dir, process string) string { return filepath.Join(dir, process+".jsonl") }

// ReadExecs reads every execution log (<process>.jsonl) in dir: one line
// per step the demo agent ran, written before it runs it.
func ReadExecs(dir string) ([]execlog.Exec, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []execlog.Exec
	for _, f := range files {
		es, err := execlog.ReadFileLog(f)
		if err != nil && !os.IsNotExist(err) {
			return out, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// Runs maps each step key of the session to the processes that ran it, one
// entry per run.
func Runs(execs []execlog.Exec, sessionID string) map[string][]string {
	out := map[string][]string{}
	for _, e := range execs {
		if e.SessionID == sessionID {
			out[e.StepKey] = append(out[e.StepKey], e.Process)
		}
	}
	return out
}

// RunsByStep maps every <session>/<step key> to the processes that ran it.
func RunsByStep(execs []execlog.Exec) map[string][]string {
	out := map[string][]string{}
	for _, e := range execs {
		k := e.SessionID + "/" + e.StepKey
		out[k] = append(out[k], e.Process)
	}
	return out
}

// Ran reports whether process ran step key of sessionID.
func Ran(execs []execlog.Exec, sessionID, key, process string) bool {
	return slices.ContainsFunc(execs, func(e execlog.Exec) bool {
		return e.SessionID == sessionID && e.StepKey == key && e.Process == process
	})
}

// CheckCommittedStepsRanOnce checks the session's execution log against its
// events: every committed step (turn.step) ran exactly once across every
// process, except those in interrupted (an uncommitted run the test's own
// crash cut short), which ran exactly twice. A test that cannot name its
// interrupted steps uses CheckStepRuns with the stops it observed.
func CheckCommittedStepsRanOnce(execs []execlog.Exec, sessionID string, evs []wire.Event, interrupted ...string) error {
	keys, err := StepKeys(evs)
	if err != nil {
		return err
	}
	runs := Runs(execs, sessionID)
	for _, k := range keys {
		want := 1
		if slices.Contains(interrupted, k) {
			want = 2
		}
		if len(runs[k]) != want {
			return fmt.Errorf("step %s ran %d times (%v), want %d; all runs %v", k, len(runs[k]), runs[k], want, runs)
		}
	}
	return nil
}

// ExecObs is one execution-log line seen by an ExecTail: it was absent from
// the read that started at NotBefore and present in the one that ended at
// By, so the agent recorded the step (and then ran it) in (NotBefore, By].
type ExecObs struct {
	execlog.Exec
	NotBefore, By time.Time
}

// ExecTail reads execution logs as they grow, bounding when each line was
// written by the reads around it.
type ExecTail struct {
	mu   sync.Mutex
	obs  []ExecObs
	offs map[string]int64
	part map[string]string
}

// TailExecs reads the execution logs of procs in dir every every, until ctx
// ends. A log that does not exist yet is read once it does.
func TailExecs(ctx context.Context, dir string, procs []string, every time.Duration) *ExecTail {
	t := &ExecTail{offs: map[string]int64{}, part: map[string]string{}}
	go func() {
		prev := time.Now()
		for ctx.Err() == nil {
			started := time.Now()
			for _, p := range procs {
				t.read(ExecLogPath(dir, p), p, prev)
			}
			prev = started
			Sleep(ctx, every)
		}
	}()
	return t
}

// read appends the complete lines added to path since the last read.
func (t *ExecTail) read(path, proc string, notBefore time.Time) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	_, _ = fh.Seek(t.offs[proc], io.SeekStart)
	b, _ := io.ReadAll(fh)
	fh.Close()
	t.offs[proc] += int64(len(b))
	lines := strings.Split(t.part[proc]+string(b), "\n")
	t.part[proc] = lines[len(lines)-1]
	by := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range lines[:len(lines)-1] {
		var e execlog.Exec
		if json.Unmarshal([]byte(l), &e) == nil {
			e.Process = proc
			t.obs = append(t.obs, ExecObs{Exec: e, NotBefore: notBefore, By: by})
		}
	}
}

// All is every line seen so far.
func (t *ExecTail) All() []ExecObs {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.obs)
}
