package pool

import (
	"github.com/baton-rt/baton/internal/execlog"
	"log/slog"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/session"
)

// wait is the deadline of every poll in these tests: generous, because the
// whole package runs in parallel under -race on two cores.
const wait = 60 * time.Second

// env is one real embedded server with the topology and a store, bound to
// the test (harness.Test: commands, event reads and waits, records, hooks,
// consumers), and the demo agent's step log that every owner it starts
// (env.owner) shares. Package pool's tests cannot import harness/inproc
// (it imports this package), so the owner starter is the one piece here.
type env struct {
	harness.Test
	t   *testing.T
	log *execlog.MemLog
}

func newEnv(t *testing.T) *env {
	t.Helper()
	h := harness.For(t)
	return &env{Test: h.Bind(h.Env(h.Server().URL()), wait), t: t, log: &execlog.MemLog{}}
}

// owner is one running Owner with its own connection and store, and the
// Runner of its Run (Stop, Cancel, Done, Err).
type owner struct {
	*Owner
	*harness.Runner
}

// owner starts an owner of deployment with process ID process: the demo
// agent on the env's log, 50 ms ticks, debug logs into the test's log,
// then mutate. It waits until the deployment serves starts, and stops when
// the test ends.
func (e *env) owner(deployment, process string, mutate ...func(*Config)) *owner {
	e.t.Helper()
	p := e.Peer(e.Env)
	cfg := Config{
		NC: p.NC, JS: p.JS, Store: p.Store, Names: p.Names, Deployment: deployment, ProcessID: process,
		Agent: &demo.Agent{Log: e.log, Process: process}, TickInterval: 50 * time.Millisecond,
		// A TTL that a -race run on two cores never misses a renewal of.
		LeaseTTL: 4 * time.Second, SweepInterval: time.Second, TaskAckWait: 2 * time.Second,
		Log: e.Logger(slog.LevelDebug),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	o, err := New(cfg)
	e.Check(err)
	w := &owner{Owner: o, Runner: harness.Go(o.Run)}
	e.t.Cleanup(func() { _ = w.Stop() })
	e.WaitServing(deployment)
	return w
}

// session reads the session record from the leader and decodes its
// checkpoint.
func (e *env) session(id string) (record.Session, runtime.Snapshot) {
	e.t.Helper()
	cur := e.Record(id)
	d, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
	e.Check(err)
	return cur, d.Snap
}
