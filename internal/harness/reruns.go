package harness

import (
	"encoding/json"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Stop is evidence that a process stopped a run before its commit landed:
// the process's own log line (a fence, one session stopped), a crash the
// test caused, or the stream's own step.interrupted record. It is the only
// thing that allows a step to run again (see CheckStepRuns).
type Stop struct {
	Process string    // whose run stopped; "" only for a step.interrupted record
	Session string    // the session stopped; "" = every session of the process
	Step    string    // the step stopped; "" = whatever step was running
	At      time.Time // when it was logged (or caused): the run stopped no later
	Why     string
}

// covers: s evidences that run, which started at run.At, was stopped before
// next (the start of the step's next run; zero = none) began.
func (s Stop) covers(run execlog.Exec, next time.Time) bool {
	return (s.Process == "" || s.Process == run.Process) &&
		(s.Session == "" || s.Session == run.SessionID) &&
		(s.Step == "" || s.Step == run.StepKey) &&
		!s.At.Before(run.At) && (next.IsZero() || !s.At.After(next))
}

// stopMsgs are the owner's log messages that stop runs before their commit
// landed: true for one session (the line names it), false for every
// session of the process.
var stopMsgs = map[string]bool{
	"fenced: stopping every session": false,
	"drain timed out; stopping the rest (their uncommitted steps re-run on the next owner)": false,
	"session stopped: process fenced":                                  true,
	"session stopped":                                                  true,
	"uncertain commit did not land: fenced, stopping":                  true,
	"commit lost the CAS: ownership moved on, stopping":                true,
	"hibernation lost the CAS: ownership moved on, stopping":           true,
	"session taken over by another run; stopping without side effects": true,
}

// logLine is what the stop rules read of an owner's JSON log line.
type logLine struct {
	Time    time.Time
	Msg     string
	Session string
}

// logLines are the JSON lines of log, in order (others are skipped).
func logLines(log string) []logLine {
	var out []logLine
	for line := range strings.Lines(log) {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// stop is the stop l records for process, if its message is one.
func (l logLine) stop(process string) (Stop, bool) {
	one, ok := stopMsgs[l.Msg]
	if !ok || (one && l.Session == "") {
		return Stop{}, false
	}
	s := Stop{Process: process, At: l.Time, Why: l.Msg}
	if one {
		s.Session = l.Session
	}
	return s, true
}

// LogStops are the stops owner process's own JSON log records, at the time
// of each line.
func LogStops(process, log string) []Stop {
	var out []Stop
	for _, l := range logLines(log) {
		if s, ok := l.stop(process); ok {
			out = append(out, s)
		}
	}
	return out
}

// leaseBack are the owner's log messages after which a process acts for
// its sessions again: a renewal that ended a pause, or a lease acquired
// after a fence.
var leaseBack = map[string]bool{
	"lease renewed after a pause: every session goes on": true,
	"lease acquired": true,
	"lease re-acquired (still held by this run)": true,
}

// ThawStops are the stops a process frozen by the test (SIGSTOP sent after
// from, SIGCONT sent after to — both taken before their signal, so a line
// the thawed process logs at once is not missed —, frozen longer than its
// fence margin) logged once it ran again and before its lease came back:
// its lease was stale at the thaw, so none of its runs performed an effect
// between the freeze and those stops, and each is evidence from the
// freeze on (At = from).
func ThawStops(process, log string, from, to time.Time) []Stop {
	var out []Stop
	for _, l := range logLines(log) {
		if l.Time.Before(to) {
			continue
		}
		if leaseBack[l.Msg] {
			break
		}
		if s, ok := l.stop(process); ok {
			s.At, s.Why = from, "frozen, then at the thaw: "+l.Msg
			out = append(out, s)
		}
	}
	return out
}

// Killed is the stop of process, which the test SIGKILLed at at: every run
// it had started stopped there.
func Killed(process string, at time.Time) Stop {
	return Stop{Process: process, At: at, Why: "SIGKILL"}
}

// InterruptedStops are the stream's step.interrupted records of sessionID:
// the step a new owner found uncommitted (the previous owner's run of it
// was abandoned) before it ran it again.
func InterruptedStops(sessionID string, evs []wire.Event) []Stop {
	var out []Stop
	for _, ev := range evs {
		if ev.Kind != wire.EventStepInterrupted {
			continue
		}
		var d wire.StepInterrupted
		if json.Unmarshal(ev.Data, &d) == nil {
			out = append(out, Stop{Session: sessionID, Step: fmt.Sprintf("%s/%d", d.TurnID, d.Step), At: ev.Time, Why: "step.interrupted"})
		}
	}
	return out
}

// StepRuns are the runs of each step of sessionID, in the order they
// started.
func StepRuns(execs []execlog.Exec, sessionID string) map[string][]execlog.Exec {
	out := map[string][]execlog.Exec{}
	for _, e := range execs {
		if e.SessionID == sessionID {
			out[e.StepKey] = append(out[e.StepKey], e)
		}
	}
	for _, rs := range out {
		slices.SortStableFunc(rs, func(a, b execlog.Exec) int { return a.At.Compare(b.At) })
	}
	return out
}

// RerunEvidence checks the one rule for a step that ran more than once: a
// step may run again only when its earlier run was stopped before its
// commit landed, and that stop is evidenced for that run — a stop of the
// run's own process (for its session, or for all of them) logged no
// earlier than the run started and no later than the next run started.
// Never unconditionally, never by another process's log. runs are one
// step's runs in start order; the last may still be running or committed.
// It returns the evidence of each run but the last.
func RerunEvidence(runs []execlog.Exec, stops []Stop) ([]Stop, error) {
	var ev []Stop
	for i := 0; i+1 < len(runs); i++ {
		run, next := runs[i], runs[i+1].At
		j := slices.IndexFunc(stops, func(s Stop) bool { return s.covers(run, next) })
		if j < 0 {
			return ev, fmt.Errorf("step %s of session %s ran in %s at %s and again in %s at %s with no stop of the first run in between (runs %s)",
				run.StepKey, run.SessionID, run.Process, run.At.Format(time.StampMicro), runs[i+1].Process, next.Format(time.StampMicro), fmtRuns(runs))
		}
		ev = append(ev, stops[j])
	}
	return ev, nil
}

// UncommittedEvidence checks a step that ran but never committed: every
// run of it was stopped (RerunEvidence, and the last run's stop at any
// time after it started).
func UncommittedEvidence(runs []execlog.Exec, stops []Stop) error {
	if _, err := RerunEvidence(runs, stops); err != nil {
		return err
	}
	last := runs[len(runs)-1]
	if !slices.ContainsFunc(stops, func(s Stop) bool { return s.covers(last, time.Time{}) }) {
		return fmt.Errorf("step %s of session %s ran in %s at %s, was never committed, and nothing stopped it (runs %s)",
			last.StepKey, last.SessionID, last.Process, last.At.Format(time.StampMicro), fmtRuns(runs))
	}
	return nil
}

// CheckStepRuns checks a session's execution log against its events: every
// committed step (turn.step) ran, and ran more than once only as
// RerunEvidence allows. It returns the committed steps that ran more than
// once.
func CheckStepRuns(execs []execlog.Exec, sessionID string, evs []wire.Event, stops []Stop) ([]string, error) {
	keys, err := StepKeys(evs)
	if err != nil {
		return nil, err
	}
	byStep := StepRuns(execs, sessionID)
	var reran []string
	for _, k := range keys {
		runs := byStep[k]
		if len(runs) == 0 {
			return reran, fmt.Errorf("committed step %s of session %s never ran", k, sessionID)
		}
		if _, err := RerunEvidence(runs, stops); err != nil {
			return reran, err
		}
		if len(runs) > 1 {
			reran = append(reran, k)
		}
	}
	return reran, nil
}

func fmtRuns(runs []execlog.Exec) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = r.Process + "@" + r.At.Format(time.StampMicro)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// OwnerStops are the stops in the logs of every run of every owner process
// (named "owner <process ID>") in ps.
func (ps *Procs) OwnerStops() []Stop {
	var out []Stop
	for name, runs := range ps.All() {
		pid, ok := strings.CutPrefix(name, "owner ")
		if !ok {
			continue
		}
		for _, p := range runs {
			out = append(out, LogStops(pid, p.Output())...)
		}
	}
	return out
}

// LogCapture keeps an in-process owner's log as JSON lines, for LogStops.
type LogCapture struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (c *LogCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

// String is everything written so far.
func (c *LogCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// Tee is a logger that writes to l and, as JSON lines at level, to c.
func (c *LogCapture) Tee(l *slog.Logger, level slog.Level) *slog.Logger {
	return slog.New(slog.NewMultiHandler(l.Handler(), slog.NewJSONHandler(c, &slog.HandlerOptions{Level: level})))
}
