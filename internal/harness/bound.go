package harness

import (
	"fmt"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// RequestTimeout bounds a Test's requests (start, the serving probe).
const RequestTimeout = 10 * time.Second

// Test is an Env bound to one test: each method does what the Env method
// of its name does, with the test's context, and fails the test where that
// returns an error. Its waits poll for Wait. The Env's own methods stay
// reachable as t.Env.Send and so on (for goroutines other than the test's).
type Test struct {
	T
	*Env
	Wait time.Duration
}

// Bind binds e to the test; its waits poll for wait.
func (t T) Bind(e *Env, wait time.Duration) Test { return Test{T: t, Env: e, Wait: wait} }

// Send sends c (SendTo) to the inbox of address addr and returns its inbox
// sequence.
func (t Test) Send(addr string, c wire.Command) uint64 {
	t.Helper()
	_, seq, err := t.SendTo(t.Context(), addr, c)
	t.Check(err)
	return seq
}

// Start sends a start request with aliases to deployment; a refusal fails
// the test.
func (t Test) Start(deployment string, aliases ...string) protocol.StartReply {
	t.Helper()
	r, err := t.Env.Start(t.Context(), protocol.StartRequest{DeploymentID: deployment, Aliases: aliases}, RequestTimeout)
	t.Check(err)
	return r
}

// StartWith sends the start request req and wants a session created.
func (t Test) StartWith(req protocol.StartRequest) protocol.StartReply {
	t.Helper()
	r, err := t.Env.Start(t.Context(), req, RequestTimeout)
	if err != nil || !r.Created {
		t.Fatalf("start: %v %+v", err, r)
	}
	return r
}

// Wake publishes a wake of the session to deployment as the ingress does.
func (t Test) Wake(deployment, sessionID string) {
	t.Helper()
	t.Check(t.WakeOn(deployment, sessionID))
}

// WaitServing waits until deployment's start responder answers.
func (t Test) WaitServing(deployment string) {
	t.Helper()
	t.Check(t.Env.WaitServing(t.Context(), deployment, RequestTimeout))
}

// Events reads the session's whole public stream.
func (t Test) Events(sessionID string) []wire.Event {
	t.Helper()
	evs, err := t.Env.Events(t.Context(), sessionID)
	t.Check(err)
	return evs
}

// WaitEvents polls the session's events until pred holds, for timeout.
func (t Test) WaitEvents(sessionID string, timeout time.Duration, what string, pred func([]wire.Event) bool) []wire.Event {
	t.Helper()
	evs, err := t.Env.WaitEvents(t.Context(), sessionID, timeout, what, pred)
	t.Check(err)
	return evs
}

// WaitFor is WaitEvents for t.Wait.
func (t Test) WaitFor(sessionID, what string, pred func([]wire.Event) bool) []wire.Event {
	t.Helper()
	return t.WaitEvents(sessionID, t.Wait, what, pred)
}

// WaitKind waits until the session has at least n events of kind.
func (t Test) WaitKind(sessionID, kind string, n int) []wire.Event {
	t.Helper()
	return t.WaitFor(sessionID, fmt.Sprintf("%d × %s", n, kind), func(evs []wire.Event) bool { return Count(evs, kind) >= n })
}

// WaitApplied waits until command commandID is applied.
func (t Test) WaitApplied(sessionID, commandID string) []wire.Event {
	t.Helper()
	return t.WaitFor(sessionID, "command.applied "+commandID, func(evs []wire.Event) bool {
		_, ok := AppliedIDs(evs)[commandID]
		return ok
	})
}

// WaitOutput waits until text was output and its commit's turn.step
// follows it (OutputCommitted).
func (t Test) WaitOutput(sessionID, text string) []wire.Event {
	t.Helper()
	return t.WaitFor(sessionID, "output "+text+" and its turn.step", OutputCommitted(text))
}

// Record reads the session record from the stream leader.
func (t Test) Record(id string) record.Session {
	t.Helper()
	cur, err := t.Env.Record(t.Context(), id)
	t.Check(err)
	return cur
}

// WaitRecord polls the session record (leader reads) until ok holds for
// it, for t.Wait, and returns it.
func (t Test) WaitRecord(id string, ok func(record.SessionRecord) bool) record.Session {
	t.Helper()
	cur, err := t.Env.WaitRecord(t.Context(), id, t.Wait, ok)
	t.Check(err)
	return cur
}

// Hook reads an address's hook; ok is false when there is none.
func (t Test) Hook(addr string) (record.Hook, bool) {
	t.Helper()
	h, ok, err := t.Env.Hook(t.Context(), addr)
	t.Check(err)
	return h, ok
}

// ConsumerExists reports whether the inbox stream has consumer name.
func (t Test) ConsumerExists(name string) bool {
	t.Helper()
	ok, err := t.Env.ConsumerExists(t.Context(), name)
	t.Check(err)
	return ok
}
