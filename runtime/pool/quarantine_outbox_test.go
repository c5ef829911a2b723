package pool

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// quarantinedAfterBreak runs a session to hibernation (out of the owner's
// memory) on an owner that quarantines at the first counted attempt,
// replaces its checkpoint with
// broken(checkpoint, last event on the stream) by CAS, wakes it and
// returns the quarantined record and the stream as it is then.
func (e *env) quarantinedAfterBreak(broken func(cp []byte, last wire.Event) []byte) (string, record.Session, []wire.Event) {
	e.t.Helper()
	o := e.owner("v1", "p1", hibernating(100*time.Millisecond, 0), quarantining(1))
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.waitHibernated(id)
	// The wake below carries no command: one that arrived while the
	// session was still in o's memory would be answered "running" and do
	// nothing (a command would be found by the re-check or a sweep).
	e.waitRechecked(o.Owner, id)
	evs := e.Events(id)
	cur := e.Record(id)
	rec := cur.Record
	rec.Checkpoint = broken(rec.Checkpoint, evs[len(evs)-1])
	if _, err := e.Store.UpdateSession(e.t.Context(), rec, cur.Revision); err != nil {
		e.t.Fatal(err)
	}
	e.Wake("v1", id)
	q := e.waitQuarantined(id)
	return id, q, e.WaitKind(id, wire.EventSessionQuarantined, 1)
}

// committedEvent is an event of session id at seq as a run stamps it.
func committedEvent(t *testing.T, id string, seq uint64, text string) wire.Event {
	t.Helper()
	ev, err := wire.NewEvent(wire.EventMessageOutput, wire.MessageOutput{TurnID: "t9", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	ev.SessionID, ev.Seq, ev.OwnerRunID, ev.DeploymentID, ev.Time = id, seq, "run-gone", "v1", time.Now().UTC().Truncate(time.Millisecond)
	return ev
}

// A checkpoint no build reads (a state version from the future) whose
// outbox holds events a crash left unpublished: the quarantine appends
// them, read leniently, at their seqs before session.quarantined (data
// version 1: nothing was lost); the outbox's first event, already on the
// stream, is not appended twice.
func TestQuarantineAppendsUnreadableOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var last uint64
	_, q, evs := e.quarantinedAfterBreak(func(cp []byte, prev wire.Event) []byte {
		last = prev.Seq
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(cp, &doc); err != nil {
			t.Fatal(err)
		}
		outbox := []wire.Event{prev, committedEvent(t, prev.SessionID, last+1, "unpublished one"),
			committedEvent(t, prev.SessionID, last+2, "unpublished two")}
		doc["stateV"], doc["eventSeq"] = json.RawMessage("99"), json.RawMessage(strconv.FormatUint(last+2, 10))
		doc["outbox"] = mustJSON(t, outbox)
		return mustJSON(t, doc)
	})
	e.CheckStream(evs)
	if len(evs) != int(last)+3 {
		t.Fatalf("%d events after %d committed and 2 unpublished: want the 2 and session.quarantined\n%s", len(evs), last, kinds(evs))
	}
	for i, text := range []string{"unpublished one", "unpublished two"} {
		ev := evs[int(last)+i]
		var d wire.MessageOutput
		if ev.Kind != wire.EventMessageOutput || json.Unmarshal(ev.Data, &d) != nil || d.Text != text || ev.OwnerRunID != "run-gone" {
			t.Fatalf("event %d: %s %s by %s, want the outbox's %q as committed", ev.Seq, ev.Kind, ev.Data, ev.OwnerRunID, text)
		}
	}
	qe := evs[len(evs)-1]
	if qe.Kind != wire.EventSessionQuarantined || qe.V != 1 || qe.Seq != last+3 || q.Record.EventSeqFloor != last+3 {
		t.Fatalf("last event %d %s v%d %s, floor %d; want session.quarantined v1 at %d", qe.Seq, qe.Kind, qe.V, qe.Data, q.Record.EventSeqFloor, last+3)
	}
	if bytes.Contains(qe.Data, []byte("outboxLost")) {
		t.Fatalf("session.quarantined %s says the outbox was lost", qe.Data)
	}
}

// A checkpoint that is not even a checkpoint object (its outbox cannot be
// read at all): session.quarantined says so at data version 2, outboxLost
// and the reference of the raw checkpoint, which the object store holds.
func TestQuarantineOutboxLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	raw := []byte(`"not a checkpoint"`)
	var last uint64
	id, q, evs := e.quarantinedAfterBreak(func(_ []byte, prev wire.Event) []byte {
		last = prev.Seq
		return raw
	})
	e.CheckStream(evs)
	qe := evs[len(evs)-1]
	if qe.Kind != wire.EventSessionQuarantined || qe.Seq != last+1 || q.Record.EventSeqFloor != last+1 || qe.V != 2 {
		t.Fatalf("last event %d %s v%d %s, floor %d; want session.quarantined v2 at %d", qe.Seq, qe.Kind, qe.V, qe.Data, q.Record.EventSeqFloor, last+1)
	}
	var d wire.SessionQuarantinedV2
	if err := json.Unmarshal(qe.Data, &d); err != nil || !d.OutboxLost || d.CheckpointRef != wire.NewBlobRef(raw) || d.Attempts != 1 {
		t.Fatalf("session.quarantined %s (%v): want outboxLost and the raw checkpoint's reference", qe.Data, err)
	}
	stored, err := e.blob(id, d.CheckpointRef)
	if err != nil || !bytes.Equal(stored, raw) {
		t.Fatalf("stored checkpoint %q (%v), want %q", stored, err, raw)
	}
	if !bytes.Equal(q.Record.Checkpoint, raw) {
		t.Fatalf("the record's checkpoint changed: %s", q.Record.Checkpoint)
	}
}

// An outbox read in part (an event whose envelope is invalid between two
// readable ones): the events up to the unreadable one are appended, the
// one after it cannot follow without a hole and is left, and
// session.quarantined says the outbox was lost, the raw checkpoint kept.
func TestQuarantinePartlyReadableOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var last uint64
	var broken []byte
	id, q, evs := e.quarantinedAfterBreak(func(cp []byte, prev wire.Event) []byte {
		last = prev.Seq
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(cp, &doc); err != nil {
			t.Fatal(err)
		}
		bad := json.RawMessage(`{"sessionId":"` + prev.SessionID + `","seq":0,"kind":"message.output"}`)
		doc["stateV"] = json.RawMessage("99")
		doc["outbox"] = mustJSON(t, []any{committedEvent(t, prev.SessionID, last+1, "readable"), bad,
			committedEvent(t, prev.SessionID, last+3, "after the unreadable one")})
		broken = mustJSON(t, doc)
		return broken
	})
	e.CheckStream(evs)
	if len(evs) != int(last)+2 || evs[last].Kind != wire.EventMessageOutput || !bytes.Contains(evs[last].Data, []byte(`"readable"`)) {
		t.Fatalf("want the readable event at %d, then session.quarantined: %s", last+1, kinds(evs))
	}
	qe := evs[len(evs)-1]
	var d wire.SessionQuarantinedV2
	if qe.Kind != wire.EventSessionQuarantined || qe.V != 2 || qe.Seq != q.Record.EventSeqFloor ||
		json.Unmarshal(qe.Data, &d) != nil || !d.OutboxLost || d.CheckpointRef != wire.NewBlobRef(broken) {
		t.Fatalf("last event %d %s v%d %s", qe.Seq, qe.Kind, qe.V, qe.Data)
	}
	if stored, err := e.blob(id, d.CheckpointRef); err != nil || !bytes.Equal(stored, broken) {
		t.Fatalf("stored checkpoint %q (%v)", stored, err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kinds lists events as seq:kind, for a failure message.
func kinds(evs []wire.Event) string {
	var b bytes.Buffer
	for _, ev := range evs {
		b.WriteString(strconv.FormatUint(ev.Seq, 10) + ":" + ev.Kind + " ")
	}
	return b.String()
}
