package wire

import (
	"fmt"
	"testing"
)

// Benchmarks of the boundary operations (cmd/bench prints the same figures
// against the JetStream round trip).

func BenchmarkEncodeDeliver(b *testing.B) {
	c, err := Decode(readFile(b, "testdata/v1/deliver.json"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Encode(Current(), c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDeliver(b *testing.B) { benchDecode(b, "testdata/v1/deliver.json") }

func BenchmarkDecodeV0Migrate(b *testing.B) { benchDecode(b, "testdata/v0/deliver.json") }

func benchDecode(b *testing.B, path string) {
	raw := readFile(b, path)
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	reg := DefaultEvents()
	raw, err := EncodeEvent(reg, envelope(EventMessageOutput, MessageOutput{TurnID: "t1", Text: "hello there"}))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := DecodeEvent(reg, raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeCheckpoint(b *testing.B) {
	c := fullCheckpoint()
	for b.Loop() {
		if _, err := EncodeCheckpoint(c); err != nil {
			b.Fatal(err)
		}
	}
}

// A current-version (version-2) delivery and child result, and the event
// encoder: the typed paths a delivery takes besides the version-1 fixture.

func BenchmarkDecodeDeliverV2(b *testing.B) { benchDecode(b, "testdata/v2/deliver.json") }

func BenchmarkDecodeChildResult(b *testing.B) { benchDecode(b, "testdata/v2/child.result.json") }

func BenchmarkEncodeEvent(b *testing.B) {
	reg := DefaultEvents()
	e := envelope(EventMessageOutput, MessageOutput{TurnID: "t1", Text: "hello there"})
	for b.Loop() {
		if _, err := EncodeEvent(reg, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCheckpointLong: a commit's checkpoint as a long session
// writes it — an inline history tail just under the owner's 8 KiB seal,
// a delivery's six outbox events, 64 recent command IDs.
func BenchmarkEncodeCheckpointLong(b *testing.B) {
	c := longCheckpoint()
	for b.Loop() {
		if _, err := EncodeCheckpoint(c); err != nil {
			b.Fatal(err)
		}
	}
}

// longCheckpoint is fullCheckpoint with a long inline history, six
// outbox events and 64 recent command IDs.
func longCheckpoint() Checkpoint {
	c := fullCheckpoint()
	c.History = nil
	for i := 0; len(c.History) < 70; i++ {
		c.History = append(c.History,
			HistoryEntry{Role: "user", Text: fmt.Sprintf("message %d: what is the weather in Lisbon tomorrow?", i)},
			HistoryEntry{Role: "agent", Text: fmt.Sprintf("reply %d: sunny, 24 °C, a light wind from the north-west.", i)})
	}
	c.Outbox = nil
	for i := range 6 {
		e := envelope(EventMessageOutput, MessageOutput{TurnID: "t4", Text: "reply"})
		e.Seq = c.EventSeq - 5 + uint64(i)
		e.SessionID = c.SessionID
		c.Outbox = append(c.Outbox, e)
	}
	c.Applied.IDs = nil
	for i := range 64 {
		c.Applied.IDs = append(c.Applied.IDs, fmt.Sprintf("cmd-%03d", i))
	}
	return c
}

// BenchmarkCheckpointEncoderLong: longCheckpoint's commit by a session's
// encoder, whose cache holds the history's entries but the last (each
// commit adds one).
func BenchmarkCheckpointEncoderLong(b *testing.B) {
	c := longCheckpoint()
	last := c.History[len(c.History)-1]
	var x CheckpointEncoder
	for b.Loop() {
		c.History[len(c.History)-1] = last
		if _, err := x.Encode(c); err != nil {
			b.Fatal(err)
		}
		c.History[len(c.History)-1] = HistoryEntry{Role: "user", Text: "next"}
		if _, err := x.Encode(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeCheckpointLong: longCheckpoint read back, as a handoff's
// candidate, a claim or the ingress's status reads a record's checkpoint.
func BenchmarkDecodeCheckpointLong(b *testing.B) {
	raw, err := EncodeCheckpoint(longCheckpoint())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := DecodeCheckpoint(raw); err != nil {
			b.Fatal(err)
		}
	}
}
