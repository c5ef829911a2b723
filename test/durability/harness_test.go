package durability_test

import (
	"context"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

const (
	// leaseTTL is the owners' lease TTL in these tests: long enough that
	// race-built processes on two cores never miss a renewal (they fence
	// after 2.25 s without one), short enough to keep each test quick.
	leaseTTL = 3 * time.Second
	// wait bounds every poll: generous, for -race on two cores.
	wait = 45 * time.Second
)

// cluster is one embedded nats-server with Baton's topology and a client
// (harness.Env: NC, JS, Store, Names), and the owner processes a test
// starts against it (deployment v1), whose logs show if the test fails.
type cluster struct {
	*harness.Env
	t     *testing.T
	h     harness.T
	srv   *harness.Server
	bin   string
	logs  string // the owners' execution logs
	procs *harness.Procs
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	h := harness.For(t)
	bin := proctest.Build(t, harness.OwnerPkg)
	srv := h.Server()
	return &cluster{Env: h.Env(srv.URL()), t: t, h: h, srv: srv, bin: bin, logs: t.TempDir(), procs: harness.NewProcs(t, 80)}
}

// owner starts an owner process with process ID pid and waits until it
// serves (lease acquired, index resumed, responders subscribed).
func (c *cluster) owner(pid string, args ...string) *proctest.Proc {
	c.t.Helper()
	return c.h.OwnerProc(c.procs, "owner "+pid, c.bin, c.ownerArgs(pid, args...), wait)
}

// ownerArgs are the flags of owner process pid: the cluster's, then args
// (a later flag wins).
func (c *cluster) ownerArgs(pid string, args ...string) []string {
	return harness.OwnerFlags(c.URL, "v1", pid, c.logs, leaseTTL, append([]string{"--task-ack-wait", "2s"}, args...)...)
}

// started records a run of process pid (its log is shown on failure).
func (c *cluster) started(pid string, p *proctest.Proc) { c.procs.Add("owner "+pid, p) }

// waitLogCount waits until p logged msg at least n times.
func (c *cluster) waitLogCount(p *proctest.Proc, msg string, n int) {
	c.t.Helper()
	c.eventually("log "+msg, func() bool { return harness.LogCount(p, msg) >= n })
}

// kill SIGKILLs p and waits for it to exit.
func (c *cluster) kill(p *proctest.Proc) time.Time {
	c.t.Helper()
	return c.h.Kill(p, wait)
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	c.h.Eventually(wait, what, cond)
}

func (c *cluster) start(req protocol.StartRequest) string {
	c.t.Helper()
	req.DeploymentID = "v1"
	r, err := c.Start(c.t.Context(), req, 20*time.Second)
	if err != nil || !r.Created {
		c.t.Fatalf("start: %v %+v", err, r)
	}
	return r.SessionID
}

// send publishes a command to the session's stable inbox subject (ID
// generated if empty) and returns the command ID.
func (c *cluster) send(sessionID string, cmd wire.Command) string {
	c.t.Helper()
	id, err := c.trySend(sessionID, cmd)
	c.h.Check(err)
	return id
}

func (c *cluster) trySend(sessionID string, cmd wire.Command) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sent, _, err := c.Send(ctx, subjects.StableToken(sessionID), cmd)
	return sent.ID, err
}

// events reads the session's whole public stream.
func (c *cluster) events(sessionID string) []wire.Event {
	c.t.Helper()
	evs, err := c.Events(c.t.Context(), sessionID)
	c.h.Check(err)
	return evs
}

// waitFor polls the session's events until pred holds.
func (c *cluster) waitFor(id, what string, pred func([]wire.Event) bool) []wire.Event {
	c.t.Helper()
	evs, err := c.WaitEvents(context.Background(), id, wait, what, pred)
	c.h.Check(err)
	return evs
}

// waitOutput waits for the output and for its commit's turn.step after it.
func (c *cluster) waitOutput(id, text string) []wire.Event {
	c.t.Helper()
	return c.waitFor(id, "output "+text+" and its turn.step", harness.OutputCommitted(text))
}

func (c *cluster) waitKind(id, kind string, n int) []wire.Event {
	c.t.Helper()
	return c.waitFor(id, fmt.Sprintf("%d × %s", n, kind), func(evs []wire.Event) bool { return harness.Count(evs, kind) >= n })
}

// record reads the session record from the stream leader.
func (c *cluster) record(id string) record.SessionRecord {
	c.t.Helper()
	cur, err := c.Record(c.t.Context(), id)
	c.h.Check(err)
	return cur.Record
}

// waitRecord waits until the session record satisfies ok (leader reads).
func (c *cluster) waitRecord(id, what string, ok func(record.SessionRecord) bool) record.SessionRecord {
	c.t.Helper()
	cur, err := c.WaitRecord(c.t.Context(), id, wait, ok)
	if err != nil {
		c.t.Fatalf("waiting for %s: %v", what, err)
	}
	return cur.Record
}

// waitOwner waits until the record names process pid.
func (c *cluster) waitOwner(id, pid string) record.SessionRecord {
	c.t.Helper()
	return c.waitRecord(id, "session "+id+" owned by "+pid, func(r record.SessionRecord) bool { return r.OwnerProcess == pid })
}

// execs reads every owner's execution log.
func (c *cluster) execs() []execlog.Exec {
	c.t.Helper()
	es, err := harness.ReadExecs(c.logs)
	c.h.Check(err)
	return es
}

// waitExec waits until the step key of the session ran in process pid.
func (c *cluster) waitExec(id, key, pid string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("step %s of %s running in %s", key, id, pid), func() bool {
		return harness.Ran(c.execs(), id, key, pid)
	})
}

// runs counts how often each step key of the session ran, per process.
func (c *cluster) runs(id string) map[string][]string { return harness.Runs(c.execs(), id) }

// checkCommittedStepsRanOnce: every committed step (turn.step) ran exactly
// once across every process, except those in interrupted (the uncommitted
// step a crash cut short), which ran exactly twice.
func (c *cluster) checkCommittedStepsRanOnce(id string, evs []wire.Event, interrupted ...string) {
	c.t.Helper()
	c.h.Check(harness.CheckCommittedStepsRanOnce(c.execs(), id, evs, interrupted...))
}

// checkStream asserts seq contiguous from 1 and every command applied at
// most once; it returns the applied command IDs in event order.
func checkStream(t *testing.T, evs []wire.Event) []string {
	t.Helper()
	return harness.CommandIDs(harness.For(t).CheckStream(evs))
}

// consumers lists the inbox stream's consumer names.
func (c *cluster) consumers() []string {
	c.t.Helper()
	names, err := c.Consumers(c.t.Context())
	c.h.Check(err)
	return names
}

// restartServer shuts the server down, keeps it down for down, and starts
// it again on the same port with the same store.
func (c *cluster) restartServer(down time.Duration) {
	c.t.Helper()
	if err := c.srv.Restart(down); err != nil {
		c.t.Errorf("%v", err)
	}
}

// wake publishes a wake for the session as the ingress does.
func (c *cluster) wake(sessionID string) {
	c.t.Helper()
	c.h.Check(c.Wake(sessionID))
}
