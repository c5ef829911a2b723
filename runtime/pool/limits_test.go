package pool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// The checkpoint limit derives from the session bucket's limit: a
// checkpoint of exactly wire.MaxCheckpointBytes, in a record whose other
// fields are as long as they get, is stored by a real server in the bucket
// the topology creates; one byte more is refused by the encoder (never by
// the server, after the step that produced it).
func TestCheckpointLimitFitsTheBucket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := "01JLIMIT0000000000000000000"
	cp := fullCheckpoint(t, id, wire.MaxCheckpointBytes)
	b, err := wire.EncodeCheckpoint(cp)
	if err != nil || len(b) != wire.MaxCheckpointBytes {
		t.Fatalf("checkpoint of %d bytes: %v", len(b), err)
	}
	long := strings.Repeat("r", 128)
	rec := record.SessionRecord{
		SessionID: id, OwnerRunID: long, DeploymentID: strings.Repeat("d", 64), Epoch: 1 << 40,
		OwnerProcess: long, State: record.StateActive, Consumer: id + "-1099511627776", WireV: 1,
		Writer: long, WriteCounter: 1 << 40, UpdatedAt: time.Now(), Checkpoint: b,
		Handoff: &record.HandoffOutcome{ID: long, Target: strings.Repeat("t", 64), Outcome: "completed", Step: "activate",
			From: strings.Repeat("f", 64), TriggerSeq: 1 << 40, TriggerCommandID: long},
	}
	rev, err := e.Store.CreateSession(e.t.Context(), rec)
	if err != nil {
		t.Fatalf("a record with a checkpoint at the limit was refused: %v", err)
	}
	if _, err := e.Store.UpdateSession(e.t.Context(), rec, rev); err != nil {
		t.Fatalf("a CAS of a record at the limit was refused: %v", err)
	}
	if _, err := wire.EncodeCheckpoint(oneByteMore(cp)); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("a checkpoint one byte over the limit: %v, want ErrTooLarge", err)
	}
}

// fullCheckpoint builds a valid checkpoint whose encoding is exactly size
// bytes: inline state and history near their limit, and an outbox of
// events filled to reach size.
func fullCheckpoint(t *testing.T, id string, size int) wire.Checkpoint {
	t.Helper()
	cp := wire.Checkpoint{SessionID: id, Tokens: []string{id},
		State:   json.RawMessage(`"` + strings.Repeat("s", 120<<10) + `"`),
		History: []wire.HistoryEntry{{Role: "user", Text: strings.Repeat("h", 120<<10)}}}
	n := size - 280<<10
	for range 20 {
		fillOutbox(&cp, id, n)
		b, err := wire.EncodeCheckpoint(cp)
		if errors.Is(err, wire.ErrTooLarge) {
			n -= 8 << 10
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == size {
			return cp
		}
		n += size - len(b)
	}
	t.Fatalf("no checkpoint of %d bytes", size)
	return cp
}

// fillOutbox sets an outbox of events holding n bytes of filler.
func fillOutbox(cp *wire.Checkpoint, id string, n int) {
	cp.Outbox = nil
	for i := 0; n > 0; i++ {
		k := min(n, 15<<10)
		cp.Outbox = append(cp.Outbox, wire.Event{SessionID: id, Seq: uint64(i + 1), Time: time.Unix(1700000000, 0).UTC(),
			OwnerRunID: "run", DeploymentID: "v1", Kind: "agent.note", V: 1,
			Data: json.RawMessage(`{"f":"` + strings.Repeat("o", k) + `"}`)})
		n -= k
	}
	cp.EventSeq = uint64(len(cp.Outbox))
}

// oneByteMore grows the last outbox event's filler by one byte.
func oneByteMore(cp wire.Checkpoint) wire.Checkpoint {
	cp.Outbox = append([]wire.Event(nil), cp.Outbox...)
	last := &cp.Outbox[len(cp.Outbox)-1]
	last.Data = json.RawMessage(strings.Replace(string(last.Data), `"f":"`, `"f":"o`, 1))
	return cp
}
