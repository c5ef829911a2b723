package wire

import "testing"

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
