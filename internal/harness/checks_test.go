package harness

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-rt/baton/wire"
)

func ev(seq uint64, kind string, data any) wire.Event {
	b, _ := json.Marshal(data)
	return wire.Event{SessionID: "s", Seq: seq, Kind: kind, Data: b}
}

func applied(seq uint64, id string) wire.Event {
	return ev(seq, wire.EventCommandApplied, wire.CommandApplied{CommandID: id, Seq: seq * 10})
}

func TestCheckStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []wire.Event
		err  string
		ids  []string
	}{
		{"empty", nil, "", nil},
		{"ok", []wire.Event{applied(1, "a"), ev(2, wire.EventTurnStep, wire.TurnStep{}), applied(3, "b")}, "", []string{"a", "b"}},
		{"gap", []wire.Event{applied(1, "a"), applied(3, "b")}, "not contiguous", nil},
		{"from 2", []wire.Event{applied(2, "a")}, "not contiguous", nil},
		{"same ID twice", []wire.Event{applied(1, "a"), applied(2, "a")}, "applied twice", nil},
		{"same seq twice", []wire.Event{applied(1, "a"), ev(2, wire.EventCommandApplied, wire.CommandApplied{CommandID: "b", Seq: 10})}, "applied twice", nil},
	} {
		got, err := CheckStream(tc.evs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(CommandIDs(got), ",") != strings.Join(tc.ids, ",") {
			t.Errorf("%s: %v %v, want %v", tc.name, CommandIDs(got), err, tc.ids)
		}
		if by := ByID(got); len(by) != len(tc.ids) || (len(got) > 0 && by[got[0].CommandID] != got[0].Seq) {
			t.Errorf("%s: ByID %v of %v", tc.name, by, got)
		}
	}
}

func TestOutputCommitted(t *testing.T) {
	out := ev(1, wire.EventMessageOutput, wire.MessageOutput{Text: "x"})
	step := ev(2, wire.EventTurnStep, wire.TurnStep{})
	if OutputCommitted("x")([]wire.Event{out}) || !OutputCommitted("x")([]wire.Event{out, step}) ||
		OutputCommitted("x")([]wire.Event{step, out}) || OutputCommitted("y")([]wire.Event{out, step}) {
		t.Fatal("OutputCommitted wants the output, then a turn.step")
	}
}

func TestDedupe(t *testing.T) {
	a, b := applied(1, "a"), applied(2, "b")
	got, dups, err := Dedupe([]wire.Event{b, a, b})
	if err != nil || dups != 1 || len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("Dedupe = %v %d %v", got, dups, err)
	}
	other := applied(2, "c")
	if _, _, err := Dedupe([]wire.Event{b, other}); err == nil {
		t.Fatal("two different events with one seq: no error")
	}
}

func TestReadFrames(t *testing.T) {
	in := ": hello\n\nid: 1\nevent: a\ndata: {\"x\":1}\n\n: ping\nid: 2\nevent: b\ndata: one\ndata: two\n\nid: 3\n\nevent: live\ndata: {}\n\n"
	var got []Frame
	pings := 0
	if err := ReadFrames(strings.NewReader(in), func(f Frame) bool { got = append(got, f); return true }, func() { pings++ }); err != nil {
		t.Fatal(err)
	}
	want := []Frame{{ID: 1, HasID: true, Event: "a", Data: `{"x":1}`}, {ID: 2, HasID: true, Event: "b", Data: "one\ntwo"}, {Event: "live", Data: "{}"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || pings != 2 {
		t.Fatalf("frames %+v pings %d, want %+v and 2", got, pings, want)
	}
}

// TestSettled: a session is settled only when every turn it started has
// ended, completed or cancelled, a re-published copy included.
func TestSettled(t *testing.T) {
	tl := &Tail{evs: map[string][]wire.Event{}}
	if !tl.Settled("s") {
		t.Fatal("a session with no events is not settled")
	}
	add := func(e wire.Event) { tl.evs["s"] = append(tl.evs["s"], e) }
	add(ev(1, wire.EventTurnStarted, wire.TurnStarted{TurnID: "t1"}))
	add(ev(2, wire.EventTurnStep, wire.TurnStep{TurnID: "t1", Step: 1}))
	if tl.Settled("s") {
		t.Fatal("settled with turn t1 open")
	}
	add(ev(3, wire.EventTurnCompleted, wire.TurnCompleted{TurnID: "t1"}))
	add(ev(4, wire.EventTurnStarted, wire.TurnStarted{TurnID: "t2"}))
	add(ev(4, wire.EventTurnStarted, wire.TurnStarted{TurnID: "t2"}))
	if tl.Settled("s") {
		t.Fatal("settled with turn t2 open")
	}
	add(ev(5, wire.EventTurnCancelled, wire.TurnCancelled{TurnID: "t2"}))
	if !tl.Settled("s") {
		t.Fatal("not settled after t1 completed and t2 cancelled")
	}
}
