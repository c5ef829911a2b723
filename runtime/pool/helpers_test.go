package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// wait is the deadline of every poll in these tests: generous, because the
// whole package runs in parallel under -race on two cores.
const wait = 60 * time.Second

// startWith sends a full start request (timeout, aliases) to deployment.
func (e *env) startWith(req protocol.StartRequest) protocol.StartReply {
	e.t.Helper()
	data, _ := json.Marshal(req)
	msg, err := e.nc.Request(e.names.Start(req.DeploymentID), data, 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	var r protocol.StartReply
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Error != nil || !r.Created {
		e.t.Fatalf("start: %v %+v", err, r)
	}
	return r
}

// session reads the session record from the leader and decodes its checkpoint.
func (e *env) session(id string) (record.Session, runtime.Snapshot) {
	e.t.Helper()
	cur, err := e.store.LeaderSession(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
	snap := d.Snap
	if err != nil {
		e.t.Fatal(err)
	}
	return cur, snap
}

// hook reads an address's hook; ok is false when there is none.
func (e *env) hook(addr string) (record.Hook, bool) {
	e.t.Helper()
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		e.t.Fatal(err)
	}
	h, _, err := e.store.GetHook(e.t.Context(), tok)
	if errors.Is(err, record.ErrNotFound) {
		return record.Hook{}, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return h, true
}

// consumerExists reports whether the inbox consumer exists.
func (e *env) consumerExists(name string) bool {
	e.t.Helper()
	_, err := e.js.Consumer(e.t.Context(), e.names.InboxStream(), name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// waitFor polls the session's events until pred holds; on timeout it shows
// what the stream holds.
func (e *env) waitFor(id, what string, pred func([]wire.Event) bool) []wire.Event {
	e.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		evs := e.events(id)
		if pred(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s; events %s; outputs %q; applied %v",
				wait, what, kinds(evs), outputs(evs), appliedOrder(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitKind waits until the session has at least n events of kind.
func (e *env) waitKind(id, kind string, n int) []wire.Event {
	e.t.Helper()
	return e.waitFor(id, fmt.Sprintf("%d × %s", n, kind), func(evs []wire.Event) bool {
		return count(evs, kind) >= n
	})
}

// waitApplied waits until the command is applied (command.applied).
func (e *env) waitApplied(id, commandID string) []wire.Event {
	e.t.Helper()
	return e.waitFor(id, "command.applied "+commandID, func(evs []wire.Event) bool {
		_, ok := appliedIDs(evs)[commandID]
		return ok
	})
}

// waitOutput waits until text was output.
// waitOutput waits for the output and for its commit's turn.step after it:
// a commit's events are appended in order and in the background, so the
// output alone does not mean the rest of its commit is on the stream yet.
func (e *env) waitOutput(id, text string) []wire.Event {
	e.t.Helper()
	return e.waitFor(id, "output "+text+" and its turn.step", func(evs []wire.Event) bool {
		for i, ev := range evs {
			if ev.Kind == wire.EventMessageOutput && slices.Contains(outputs(evs[i:i+1]), text) {
				return slices.ContainsFunc(evs[i+1:], func(x wire.Event) bool { return x.Kind == wire.EventTurnStep })
			}
		}
		return false
	})
}

func appliedIDs(evs []wire.Event) map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range evs {
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			out[d.CommandID] = d.Seq
		}
	}
	return out
}

// appliedOrder lists the applied command IDs in event order.
func appliedOrder(evs []wire.Event) []wire.CommandApplied {
	var out []wire.CommandApplied
	for _, ev := range evs {
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

// data decodes the data of the first event of kind (fatal if none).
func data[T any](t *testing.T, evs []wire.Event, kind string) T {
	t.Helper()
	all := dataAll[T](t, evs, kind)
	if len(all) == 0 {
		t.Fatalf("no %s event in %s", kind, kinds(evs))
	}
	return all[0]
}

// dataAll decodes the data of every event of kind.
func dataAll[T any](t *testing.T, evs []wire.Event, kind string) []T {
	t.Helper()
	var out []T
	for _, ev := range evs {
		if ev.Kind != kind {
			continue
		}
		var v T
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatalf("%s data: %v", kind, err)
		}
		out = append(out, v)
	}
	return out
}

// kinds renders the event kinds, for failure messages.
func kinds(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// stepKeys lists the committed step keys (turn.step) as <turnId>/<step>.
func stepKeys(t *testing.T, evs []wire.Event) []string {
	t.Helper()
	var out []string
	for _, s := range dataAll[wire.TurnStep](t, evs, wire.EventTurnStep) {
		out = append(out, fmt.Sprintf("%s/%d", s.TurnID, s.Step))
	}
	return out
}

// index returns the position of the first event matching pred, or -1.
func index(evs []wire.Event, pred func(wire.Event) bool) int {
	return slices.IndexFunc(evs, pred)
}

func isKind(kind string) func(wire.Event) bool {
	return func(ev wire.Event) bool { return ev.Kind == kind }
}

func isOutput(text string) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		if ev.Kind != wire.EventMessageOutput {
			return false
		}
		var d wire.MessageOutput
		_ = json.Unmarshal(ev.Data, &d)
		return d.Text == text
	}
}

func isApplied(commandID string) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		if ev.Kind != wire.EventCommandApplied {
			return false
		}
		var d wire.CommandApplied
		_ = json.Unmarshal(ev.Data, &d)
		return d.CommandID == commandID
	}
}

// Command builders (the harness's send fills ID, version, deployment).

func steer(text string) wire.Command {
	c := deliver(text)
	c.Deliver.Mode = wire.ModeSteer
	return c
}

func withID(id string, c wire.Command) wire.Command {
	c.ID = id
	return c
}

func control(kind wire.Kind) wire.Command { return wire.Command{Kind: kind} }

func inputResponse(requestID, value string) wire.Command {
	return wire.Command{Kind: wire.KindInputResponse, InputResponse: &wire.InputResponse{RequestID: requestID, Value: json.RawMessage(value)}}
}

func authCallback(attemptID, result string) wire.Command {
	return wire.Command{Kind: wire.KindAuthCallback, AuthCallback: &wire.AuthCallback{AttemptID: attemptID, Result: result}}
}

func taskResult(taskID, result string) wire.Command {
	return wire.Command{Kind: wire.KindTaskResult, TaskResult: &wire.TaskResult{TaskID: taskID, Result: json.RawMessage(result)}}
}

func timeout(timerID string) wire.Command {
	return wire.Command{Kind: wire.KindTimeout, Timeout: &wire.Timeout{TimerID: timerID, Deadline: time.Now().UTC()}}
}

func move(deployment string) wire.Command {
	return wire.Command{Kind: wire.KindMove, Move: &wire.Move{DeploymentID: deployment}}
}

// trySend is send for goroutines other than the test's: it returns errors.
func (e *env) trySend(addr string, c wire.Command) (uint64, error) {
	c.V, c.AcceptedAt = wire.CurrentVersion, time.Now().UTC()
	if c.AcceptedDeploymentID == "" {
		c.AcceptedDeploymentID = "v1"
	}
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		return 0, err
	}
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		return 0, err
	}
	ack, err := e.js.Publish(context.Background(), e.names.Inbox(tok), data, jetstream.WithMsgID(c.ID))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
