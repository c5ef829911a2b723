package subagent

import (
	"encoding/json"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

const (
	// leaseTTL is the owner subprocesses' lease TTL: long enough that
	// race-built processes on two cores never miss a renewal, short enough
	// that a peer takes a killed process's sessions over quickly.
	leaseTTL = 3 * time.Second
	// wait bounds every poll: generous, for -race on two cores.
	wait = 45 * time.Second
)

// world is one embedded nats-server with Baton's topology, a client bound
// to the test (harness.Test: Send, Events, the waits) and the owners the
// test starts against it — in process (owner) or as subprocesses (proc) —
// each writing the demo agent's execution log into logs/<process>.jsonl.
type world struct {
	harness.Test
	t     *testing.T
	logs  string
	procs *harness.Procs
}

func newWorld(t *testing.T) *world {
	t.Helper()
	h := harness.For(t)
	srv := h.Server()
	return &world{Test: h.Bind(h.Env(srv.URL()), wait), t: t, logs: t.TempDir(), procs: harness.NewProcs(t, 80)}
}

// owner starts an in-process owner of dep with process ID pid, its demo
// agent logging executions to the world's logs, then mutate.
func (w *world) owner(dep, pid string, mutate ...func(*pool.Config)) *inproc.Owner {
	w.t.Helper()
	l, err := execlog.OpenFileLog(harness.ExecLogPath(w.logs, pid))
	w.Check(err)
	w.t.Cleanup(func() { _ = l.Close() })
	return inproc.Run(w.t, w.Env, dep, pid, append([]func(*pool.Config){func(c *pool.Config) {
		c.Agent = &demo.Agent{Log: l, Process: pid}
	}}, mutate...)...)
}

// proc starts an owner subprocess of dep with process ID pid and waits
// until it serves.
func (w *world) proc(dep, pid string) *proctest.Proc {
	w.t.Helper()
	bin := proctest.Build(w.t, harness.OwnerPkg)
	args := harness.OwnerFlags(w.URL, dep, pid, w.logs, leaseTTL, "--task-ack-wait", "2s")
	return w.OwnerProc(w.procs, "owner "+pid, bin, args, wait)
}

// kill SIGKILLs p and waits for it to exit.
func (w *world) kill(p *proctest.Proc) { w.Kill(p, wait) }

// start creates a session on dep.
func (w *world) start(dep string) string {
	w.t.Helper()
	return w.StartWith(protocol.StartRequest{DeploymentID: dep}).SessionID
}

// stamped is a delivery with command ID id accepted by an ingress of dep.
func stamped(id, dep, text string) wire.Command {
	c := harness.WithID(id, harness.Deliver(text))
	c.AcceptedDeploymentID = dep
	return c
}

// child is the session ID of parent's child by handle at generation gen.
func child(parent, handle string, gen int) string { return wire.ChildSessionID(parent, handle, gen) }

// checkpoint decodes the session's checkpoint from its record (leader read).
func (w *world) checkpoint(id string) (record.SessionRecord, runtime.Snapshot) {
	w.t.Helper()
	cur := w.Record(id)
	cp, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
	w.Check(err)
	return cur.Record, cp.Snap
}

// waitHandle waits until the parent's checkpoint shows handle name in state.
func (w *world) waitHandle(parent, name, state string) runtime.Handle {
	w.t.Helper()
	var got runtime.Handle
	w.Eventually(wait, fmt.Sprintf("handle %s of %s %s", name, parent, state), func() bool {
		cur, err := w.Env.Record(w.Context(), parent)
		if err != nil {
			return false
		}
		cp, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
		if err != nil {
			return false
		}
		i := slices.IndexFunc(cp.Snap.Handles, func(h runtime.Handle) bool { return h.Handle == name })
		if i < 0 {
			return false
		}
		got = cp.Snap.Handles[i]
		return got.State == state
	})
	return got
}

// children lists the sessions whose checkpoint names parent as theirs.
func (w *world) children(parent string) []string {
	w.t.Helper()
	kv, err := w.JS.KeyValue(w.Context(), w.Names.SessionsBucket())
	w.Check(err)
	keys, err := kv.ListKeys(w.Context())
	w.Check(err)
	var out []string
	for k := range keys.Keys() {
		e, err := kv.Get(w.Context(), k)
		if err != nil {
			continue
		}
		var rec record.SessionRecord
		if json.Unmarshal(e.Value(), &rec) != nil || len(rec.Checkpoint) == 0 {
			continue
		}
		cp, err := session.DecodeCheckpoint(rec.Checkpoint)
		if err == nil && cp.Snap.Parent != nil && cp.Snap.Parent.SessionID == parent {
			out = append(out, rec.SessionID)
		}
	}
	return out
}

// execs reads every owner's execution log.
func (w *world) execs() []execlog.Exec {
	w.t.Helper()
	es, err := harness.ReadExecs(w.logs)
	w.Check(err)
	return es
}

// waitExec waits until step key of the session has run in process pid.
func (w *world) waitExec(id, key, pid string) {
	w.t.Helper()
	w.Eventually(wait, fmt.Sprintf("step %s of %s running in %s", key, id, pid), func() bool {
		return harness.Ran(w.execs(), id, key, pid)
	})
}

// check asserts the invariants of one session's stream: seq contiguous,
// every command applied once, every committed step ran exactly once —
// except a step a kill of process killed cut short before its commit,
// which ran once there and once more in the successor (that exception is
// only granted to a step whose turn.step a run of another process
// stamped). It returns the applied command IDs.
func (w *world) check(id string, evs []wire.Event, killed string) []string {
	w.t.Helper()
	applied := harness.CommandIDs(w.CheckStream(evs))
	runs := harness.Runs(w.execs(), id)
	steps := harness.AllData[wire.TurnStep](w.t, evs, wire.EventTurnStep)
	for i, s := range steps {
		key := fmt.Sprintf("%s/%d", s.TurnID, s.Step)
		got := runs[key]
		if len(got) == 1 {
			continue
		}
		if len(got) == 2 && killed != "" && got[0] == killed && got[1] != killed {
			continue
		}
		w.t.Fatalf("session %s: committed step %s (turn.step #%d) ran %d times %v; all runs %v", id, key, i, len(got), got, runs)
	}
	return applied
}

// skips decodes the handoff.skipped events (data version 2 has every
// field of version 1 plus the reason child).
func skips(t *testing.T, evs []wire.Event) []wire.HandoffSkippedV2 {
	t.Helper()
	return harness.AllData[wire.HandoffSkippedV2](t, evs, wire.EventHandoffSkipped)
}

// eventV is the data version of the first event of kind (0 if none).
func eventV(evs []wire.Event, kind string) int {
	if e, ok := harness.Find(evs, harness.IsKind(kind)); ok {
		return e.V
	}
	return 0
}

// count is the number of outputs equal to text.
func count(outputs []string, text string) int {
	n := 0
	for _, o := range outputs {
		if o == text {
			n++
		}
	}
	return n
}

// hasPrefix reports whether some output starts with prefix.
func hasPrefix(outputs []string, prefix string) bool {
	return slices.ContainsFunc(outputs, func(o string) bool { return strings.HasPrefix(o, prefix) })
}

// settled holds once every started turn ended (completed or cancelled).
func settled(evs []wire.Event) bool {
	started := harness.Count(evs, wire.EventTurnStarted)
	return started > 0 && started == harness.Count(evs, wire.EventTurnCompleted)+harness.Count(evs, wire.EventTurnCancelled)
}
