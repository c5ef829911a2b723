package durability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// leaseTTL is the owners' lease TTL in these tests: long enough that
	// race-built processes on two cores never miss a renewal (they fence
	// after 2.25 s without one), short enough to keep each test quick.
	leaseTTL = 3 * time.Second
	// wait bounds every poll: generous, for -race on two cores.
	wait = 45 * time.Second
)

// cluster is one embedded nats-server with Baton's topology, a client, and
// the owner processes a test starts against it (deployment v1).
type cluster struct {
	t     *testing.T
	dir   string
	srv   *server.Server
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *kv.Store
	names subjects.Names
	bin   string
	logs  string
	seq   atomic.Uint64

	mu    sync.Mutex
	procs map[string][]*proctest.Proc
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	bin := proctest.Build(t, "github.com/baton-rt/baton/cmd/owner")
	c := &cluster{t: t, dir: t.TempDir(), logs: t.TempDir(), bin: bin, names: subjects.Default(), procs: map[string][]*proctest.Proc{}}
	c.srv = natstest.ServerIn(t, c.dir)
	c.url = c.srv.ClientURL()
	c.nc, c.js = natstest.Connect(t, c.url)
	if _, err := topology.Ensure(t.Context(), c.js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	store, err := kv.Open(t.Context(), c.js, c.names)
	if err != nil {
		t.Fatal(err)
	}
	c.store = store
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("BATON_TEST_LOGS") != "1" {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for pid, ps := range c.procs {
			for i, p := range ps {
				t.Logf("---- owner %s (run %d) ----\n%s", pid, i+1, tail(p.Output(), 80))
			}
		}
	})
	return c
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// owner starts an owner process with process ID pid and waits until it
// serves (lease acquired, index resumed, responders subscribed).
func (c *cluster) owner(pid string, args ...string) *proctest.Proc {
	c.t.Helper()
	p := proctest.Start(c.t, c.bin, c.ownerArgs(pid, args...)...)
	c.started(pid, p)
	c.waitLogCount(p, "owner serving", 1)
	return p
}

// ownerArgs are the flags of owner process pid: the cluster's, then args
// (a later flag wins).
func (c *cluster) ownerArgs(pid string, args ...string) []string {
	all := []string{
		"--nats-url", c.url, "--deployment-id", "v1", "--process-id", pid,
		"--exec-log", filepath.Join(c.logs, pid+".jsonl"), "--lease-ttl", leaseTTL.String(),
		"--sweep-interval", "1s", "--task-ack-wait", "2s", "--log-format", "json", "--log-level", "debug",
	}
	return append(all, args...)
}

// started records a run of process pid (its log is shown on failure).
func (c *cluster) started(pid string, p *proctest.Proc) {
	c.mu.Lock()
	c.procs[pid] = append(c.procs[pid], p)
	c.mu.Unlock()
}

// waitLogCount waits until p logged msg at least n times.
func (c *cluster) waitLogCount(p *proctest.Proc, msg string, n int) {
	c.t.Helper()
	c.eventually("log "+msg, func() bool { return logCount(p, msg) >= n })
}

func logCount(p *proctest.Proc, msg string) int {
	return strings.Count(p.Output(), `"msg":"`+msg+`"`)
}

// kill SIGKILLs p and waits for it to exit.
func (c *cluster) kill(p *proctest.Proc) time.Time {
	c.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	at := time.Now()
	p.Wait(c.t, wait)
	return at
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (c *cluster) start(req protocol.StartRequest) string {
	c.t.Helper()
	req.DeploymentID = "v1"
	data, _ := json.Marshal(req)
	msg, err := c.nc.Request(c.names.Start("v1"), data, 20*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	var r protocol.StartReply
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Error != nil || !r.Created {
		c.t.Fatalf("start: %v %+v", err, r)
	}
	return r.SessionID
}

// send publishes a command to the session's stable inbox subject (ID
// generated if empty) and returns the command ID.
func (c *cluster) send(sessionID string, cmd wire.Command) string {
	c.t.Helper()
	id, err := c.trySend(sessionID, cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

func (c *cluster) trySend(sessionID string, cmd wire.Command) (string, error) {
	if cmd.ID == "" {
		cmd.ID = fmt.Sprintf("c%d", c.seq.Add(1))
	}
	cmd.V, cmd.AcceptedAt, cmd.AcceptedDeploymentID = wire.CurrentVersion, time.Now().UTC(), "v1"
	data, err := wire.Encode(wire.Current(), cmd)
	if err != nil {
		return "", err
	}
	ctx, cancel := contextTimeout(5 * time.Second)
	defer cancel()
	_, err = c.js.Publish(ctx, c.names.Inbox(subjects.StableToken(sessionID)), data, jetstream.WithMsgID(cmd.ID))
	return cmd.ID, err
}

func deliver(text string) wire.Command {
	return wire.Command{Kind: wire.KindDeliver, Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}}}
}

func withID(id string, cmd wire.Command) wire.Command {
	cmd.ID = id
	return cmd
}

// events reads the session's whole public stream.
func (c *cluster) events(sessionID string) []wire.Event {
	c.t.Helper()
	evs, err := readEvents(c.js, c.names, sessionID)
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

func readEvents(js jetstream.JetStream, names subjects.Names, sessionID string) ([]wire.Event, error) {
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.Events(sessionID)}})
	if err != nil {
		return nil, err
	}
	var out []wire.Event
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := wire.DecodeEvent(nil, m.Data())
			if err != nil {
				return nil, fmt.Errorf("event does not decode: %w", err)
			}
			out = append(out, ev)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
	}
}

// waitFor polls the session's events until pred holds.
func (c *cluster) waitFor(id, what string, pred func([]wire.Event) bool) []wire.Event {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		evs, err := readEvents(c.js, c.names, id)
		if err == nil && pred(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s; events %s; outputs %q", wait, what, kinds(evs), outputs(evs))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitOutput waits for the output and for its commit's turn.step after it:
// a commit's events are appended in order and in the background, so the
// output alone does not mean the rest of its commit is on the stream yet.
func (c *cluster) waitOutput(id, text string) []wire.Event {
	c.t.Helper()
	return c.waitFor(id, "output "+text+" and its turn.step", func(evs []wire.Event) bool {
		for i, e := range evs {
			if e.Kind == wire.EventMessageOutput && slices.Contains(outputs(evs[i:i+1]), text) {
				return slices.ContainsFunc(evs[i+1:], func(e wire.Event) bool { return e.Kind == wire.EventTurnStep })
			}
		}
		return false
	})
}

func (c *cluster) waitKind(id, kind string, n int) []wire.Event {
	c.t.Helper()
	return c.waitFor(id, fmt.Sprintf("%d × %s", n, kind), func(evs []wire.Event) bool { return count(evs, kind) >= n })
}

// record reads the session record from the stream leader.
func (c *cluster) record(id string) record.SessionRecord {
	c.t.Helper()
	cur, err := c.store.LeaderSession(c.t.Context(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	return cur.Record
}

// waitOwner waits until the record names process pid.
func (c *cluster) waitOwner(id, pid string) record.SessionRecord {
	c.t.Helper()
	var rec record.SessionRecord
	c.eventually("session "+id+" owned by "+pid, func() bool {
		cur, err := c.store.LeaderSession(c.t.Context(), id)
		rec = cur.Record
		return err == nil && rec.OwnerProcess == pid
	})
	return rec
}

// execs reads every owner's execution log.
func (c *cluster) execs() []runtime.Exec {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.logs, "*.jsonl"))
	var out []runtime.Exec
	for _, f := range files {
		es, err := demo.ReadFileLog(f)
		if err != nil && !os.IsNotExist(err) {
			c.t.Fatal(err)
		}
		out = append(out, es...)
	}
	return out
}

// waitExec waits until the step key of the session ran in process pid.
func (c *cluster) waitExec(id, key, pid string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("step %s of %s running in %s", key, id, pid), func() bool {
		return slices.Contains(c.execs(), runtime.Exec{SessionID: id, StepKey: key, Process: pid})
	})
}

// runs counts how often each step key of the session ran, per process.
func (c *cluster) runs(id string) map[string][]string {
	out := map[string][]string{}
	for _, e := range c.execs() {
		if e.SessionID == id {
			out[e.StepKey] = append(out[e.StepKey], e.Process)
		}
	}
	return out
}

// checkCommittedStepsRanOnce: every committed step (turn.step) ran exactly
// once across every process, except those in interrupted (the uncommitted
// step a crash cut short), which ran exactly twice.
func (c *cluster) checkCommittedStepsRanOnce(id string, evs []wire.Event, interrupted ...string) {
	c.t.Helper()
	runs := c.runs(id)
	for _, k := range stepKeys(c.t, evs) {
		want := 1
		if slices.Contains(interrupted, k) {
			want = 2
		}
		if len(runs[k]) != want {
			c.t.Fatalf("step %s ran %d times (%v), want %d; all runs %v", k, len(runs[k]), runs[k], want, runs)
		}
	}
}

func count(evs []wire.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func kinds(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func outputs(evs []wire.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == wire.EventMessageOutput {
			var d wire.MessageOutput
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

func stepKeys(t *testing.T, evs []wire.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Kind != wire.EventTurnStep {
			continue
		}
		var d wire.TurnStep
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%d", d.TurnID, d.Step))
	}
	return out
}

// checkStream asserts seq contiguous from 1 and every command applied at
// most once; it returns the applied command IDs in event order.
func checkStream(t *testing.T, evs []wire.Event) []string {
	t.Helper()
	var order []string
	seen := map[string]bool{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: stream not contiguous", i+1, ev.Seq)
		}
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			if seen[d.CommandID] {
				t.Fatalf("command %s applied twice", d.CommandID)
			}
			seen[d.CommandID] = true
			order = append(order, d.CommandID)
		}
	}
	return order
}

// eventsBy returns the events stamped by owner run runID.
func eventsBy(evs []wire.Event, runID string) []wire.Event {
	var out []wire.Event
	for _, e := range evs {
		if e.OwnerRunID == runID {
			out = append(out, e)
		}
	}
	return out
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// consumers lists the inbox stream's consumer names.
func (c *cluster) consumers() []string {
	c.t.Helper()
	s, err := c.js.Stream(c.t.Context(), c.names.InboxStream())
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	l := s.ConsumerNames(c.t.Context())
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// restartServer shuts the server down, waits down, and starts it again on
// the same port with the same store (natstest.Restart with an outage).
func (c *cluster) restartServer(down time.Duration) {
	c.t.Helper()
	if down == 0 {
		c.srv = natstest.Restart(c.t, c.srv, c.dir)
		return
	}
	port := c.srv.Addr().(*net.TCPAddr).Port
	natsd.Shutdown(c.srv)
	time.Sleep(down)
	s, err := natsd.Start(natsd.Config{Dir: c.dir, Port: port, Name: "test"})
	if err != nil {
		c.t.Errorf("restart nats-server: %v", err)
		return
	}
	c.t.Cleanup(func() { natsd.Shutdown(s) })
	c.srv = s
}

// wake publishes a wake for the session as the ingress does.
func (c *cluster) wake(sessionID string) {
	c.t.Helper()
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: sessionID, Source: protocol.WakeIngress})
	if err := c.nc.Publish(c.names.Wake("v1"), data); err != nil {
		c.t.Fatal(err)
	}
}
