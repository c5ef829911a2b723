package wire

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestAppliedOutOfOrder(t *testing.T) {
	var a Applied // the zero value: nothing applied
	if a.Has(1) || !a.Has(0) {
		t.Fatal("zero value")
	}
	// Session commands at 5 (deliver) and 9 (steer); 6-8 belong to others.
	a.AdvanceTo(5)
	a.Record(9, "steer") // steering applied first
	if !a.Has(9) || a.Has(5) || a.Low != 5 || !slices.Equal(a.Above, []uint64{9}) {
		t.Fatalf("after steer: %+v", a)
	}
	a.Record(5, "deliver")
	if !a.Has(5) || a.Low != 6 {
		t.Fatalf("after deliver: %+v", a)
	}
	a.AdvanceTo(10) // queue empty; the consumer delivered through 9
	if a.Low != 10 || a.Above != nil || !a.Has(7) || a.Has(10) {
		t.Fatalf("after advance: %+v", a)
	}
	if !a.HasID("steer") || !a.HasID("deliver") || a.HasID("other") {
		t.Fatalf("ids: %v", a.IDs)
	}
}

func TestAppliedIDsAreBounded(t *testing.T) {
	var a Applied
	for i := range MaxAppliedIDs + 10 {
		a.Record(uint64(i+1), string(rune('a'+i%26))+string(rune('0'+i/26)))
	}
	if len(a.IDs) != MaxAppliedIDs || a.HasID("a0") {
		t.Fatalf("len %d, oldest kept %v", len(a.IDs), a.HasID("a0"))
	}
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
}

// Property: a driver that reads a session's commands in stream order, applies
// them in any order and advances to the oldest command still queued keeps
// Applied exact (Has is true for precisely the applied commands), valid, and
// never above an unapplied command, so a consumer recreated at Low skips
// exactly the applied ones. The record survives a checkpoint round trip.
func TestAppliedProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "streamLen")
		var mine []uint64
		for s := uint64(1); s <= uint64(n); s++ {
			if rapid.Bool().Draw(t, "mine") {
				mine = append(mine, s)
			}
		}
		var a Applied
		applied := map[uint64]bool{}
		var queue []uint64
		delivered := 0
		for step := 0; step < 3*len(mine)+1; step++ {
			if delivered < len(mine) && (len(queue) == 0 || rapid.Bool().Draw(t, "read")) {
				queue = append(queue, mine[delivered])
				delivered++
				continue
			}
			if len(queue) == 0 {
				break
			}
			i := rapid.IntRange(0, len(queue)-1).Draw(t, "apply")
			seq := queue[i]
			queue = slices.Delete(queue, i, i+1)
			applied[seq] = true
			a.Record(seq, "")
			if len(queue) > 0 {
				a.AdvanceTo(slices.Min(queue))
			} else if delivered > 0 {
				a.AdvanceTo(mine[delivered-1] + 1)
			}
			if rapid.Bool().Draw(t, "checkpoint") {
				a = checkpointRoundTrip(t, a)
			}
			checkApplied(t, a, mine, applied)
		}
	})
}

func checkApplied(t *rapid.T, a Applied, mine []uint64, applied map[uint64]bool) {
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range mine {
		if a.Has(s) != applied[s] {
			t.Fatalf("Has(%d) = %v, applied %v; %+v", s, a.Has(s), applied[s], a)
		}
		if !applied[s] && s < a.Low {
			t.Fatalf("Low %d passed unapplied %d", a.Low, s)
		}
	}
}

func checkpointRoundTrip(t *rapid.T, a Applied) Applied {
	c := Checkpoint{SessionID: "s", Tokens: []string{"s"}, Applied: a}
	b, err := EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	return back.Applied
}
