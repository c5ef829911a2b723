package wire

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// The frozen event fixtures (testdata/events/fixtures, never edited) decode
// with the built-in registry and encode back to the same bytes.
func TestEventFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/events/fixtures/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	reg := DefaultEvents()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b := bytes.TrimSuffix(readFile(t, f), []byte("\n"))
			e, err := DecodeEvent(reg, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(f), ".json"); e.Kind+".v"+itoa(e.V) != want {
				t.Fatalf("fixture %s holds %s v%d", f, e.Kind, e.V)
			}
			back, err := EncodeEvent(reg, e)
			if err != nil || !bytes.Equal(back, b) {
				t.Fatalf("%v\n got %s\nwant %s", err, back, b)
			}
		})
	}
}

func itoa(v int) string { return string(rune('0' + v)) }

// session.ended is written at the lowest data version that expresses its
// reason: version 1 for every reason it knew, version 2 only for
// terminated, version 3 only for closed, version 4 only for idle_expired
// (and an end with who and why, TestSessionEndedByVersions); each version
// keeps its own schema.
func TestSessionEndedVersions(t *testing.T) {
	reg := DefaultEvents()
	for _, r := range []string{EndDone, EndExpired, EndFailed, EndCancelled, EndTerminated, EndClosed, EndIdleExpired} {
		e, err := NewSessionEnded(r)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{EndTerminated: 2, EndClosed: 3, EndIdleExpired: 4}[r]
		if want == 0 {
			want = 1
		}
		if e.V != want {
			t.Errorf("%s: data version %d, want %d", r, e.V, want)
		}
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(EventSessionEnded, nil).Time
		if _, err := EncodeEvent(reg, e); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	v1 := envelope(EventSessionEnded, SessionEnded{Reason: EndTerminated})
	if _, err := EncodeEvent(reg, v1); !errors.Is(err, ErrInvalid) {
		t.Errorf("terminated in data version 1 accepted: %v", err)
	}
	v2 := envelope(EventSessionEnded, SessionEndedV2{Reason: EndClosed})
	v2.V = 2
	if _, err := EncodeEvent(reg, v2); !errors.Is(err, ErrInvalid) {
		t.Errorf("closed in data version 2 accepted: %v", err)
	}
	if reg.Version(EventSessionEnded) != 4 || reg.SchemaV(EventSessionEnded, 1) == nil || bytes.Equal(reg.SchemaV(EventSessionEnded, 1), reg.Schema(EventSessionEnded)) {
		t.Errorf("registry does not keep both versions: newest %d", reg.Version(EventSessionEnded))
	}
}

// handoff.skipped is written at data version 2 only for reason child
// (LowestHandoffSkipped); version 1 refuses child.
func TestHandoffSkippedVersions(t *testing.T) {
	reg := DefaultEvents()
	for _, r := range []string{SkipBusy, SkipQueued, SkipInput, SkipAuthorization, SkipTask, SkipPaused, SkipChild} {
		body := LowestHandoffSkipped(HandoffSkipped{Reason: r, CommandID: "c", Seq: 1, DeploymentID: "d1", TargetDeploymentID: "d2"})
		want := 1
		if r == SkipChild {
			want = 2
		}
		if DataVersionOf(body) != want || body.EventKind() != EventHandoffSkipped {
			t.Errorf("%s: %T at data version %d, want %d", r, body, DataVersionOf(body), want)
		}
	}
	v1 := envelope(EventHandoffSkipped, HandoffSkipped{Reason: SkipChild, CommandID: "c", Seq: 1, DeploymentID: "d1", TargetDeploymentID: "d2"})
	if _, err := EncodeEvent(reg, v1); !errors.Is(err, ErrInvalid) {
		t.Errorf("child in data version 1 accepted: %v", err)
	}
	if reg.Version(EventHandoffSkipped) != 2 {
		t.Errorf("handoff.skipped newest data version %d, want 2", reg.Version(EventHandoffSkipped))
	}
}

// turn.completed is written at data version 2 for stop reasons done and
// limit and at version 3 only for error (LowestTurnCompleted); version 2
// refuses error, version 3 accepts every reason. A reader that knows only
// versions 1 and 2 (an older build) passes the frozen version 3 through
// unchanged.
func TestTurnCompletedVersions(t *testing.T) {
	reg := DefaultEvents()
	for _, r := range []string{StopDone, StopLimit, StopError} {
		body := LowestTurnCompleted(TurnCompletedV2{TurnID: "t1", StopReason: r, Usage: Usage{InputTokens: 5}})
		want := 2
		if r == StopError {
			want = 3
		}
		if DataVersionOf(body) != want || body.EventKind() != EventTurnCompleted {
			t.Errorf("%s: %T at data version %d, want %d", r, body, DataVersionOf(body), want)
		}
		e, err := NewBodyEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(e.Kind, nil).Time
		if _, err := EncodeEvent(reg, e); err != nil {
			t.Errorf("%s at data version %d: %v", r, e.V, err)
		}
	}
	v2 := envelope(EventTurnCompleted, TurnCompletedV2{TurnID: "t1", StopReason: StopError})
	v2.V = 2
	if _, err := EncodeEvent(reg, v2); !errors.Is(err, ErrInvalid) {
		t.Errorf("error in data version 2 accepted: %v", err)
	}
	v3 := envelope(EventTurnCompleted, TurnCompletedV3{TurnID: "t1", StopReason: "failed"})
	v3.V = 3
	if _, err := EncodeEvent(reg, v3); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown stop reason in data version 3 accepted: %v", err)
	}
	if reg.Version(EventTurnCompleted) != 3 {
		t.Errorf("turn.completed newest data version %d, want 3", reg.Version(EventTurnCompleted))
	}

	old := NewEventRegistry()
	if err := errors.Join(
		registerBuiltin(old, EventTurnCompleted, func(TurnCompleted) error { return nil }),
		registerBuiltinV(old, EventTurnCompleted, 2, func(TurnCompletedV2) error { return nil }),
	); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/turn.completed.v3.json"), []byte("\n"))
	e, err := DecodeEvent(old, b)
	if !errors.Is(err, ErrUnknownVersion) || e.V != 3 {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
}

// A reader that knows only data version 1 of session.ended (an older
// build) meets version 2: it gets the event, envelope validated, with
// ErrUnknownVersion, and passes it through unchanged; a reader without a
// registry passes it through as is.
func TestOlderReaderPassesNewerVersion(t *testing.T) {
	old := NewEventRegistry()
	if err := registerBuiltin(old, EventSessionEnded, func(d SessionEnded) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/session.ended.v2.json"), []byte("\n"))
	e, err := DecodeEvent(old, b)
	if !errors.Is(err, ErrUnknownVersion) || e.V != 2 || string(e.Data) != `{"reason":"terminated"}` {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
	if e, err := DecodeEvent(nil, b); err != nil || e.V != 2 {
		t.Fatalf("no registry: %+v %v", e, err)
	}
}

// A data version registers only right after the previous one.
func TestRegisterVersions(t *testing.T) {
	r := NewEventRegistry()
	if err := registerEvent(r, "x.y", 2, func(SessionEnded) error { return nil }, true); !errors.Is(err, ErrRegistry) {
		t.Fatalf("version 2 before 1: %v", err)
	}
	if err := RegisterEvent(r, "x.y", func(SessionEnded) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := RegisterEvent(r, "x.y", func(SessionEnded) error { return nil }); !errors.Is(err, ErrRegistry) {
		t.Fatalf("version 1 twice: %v", err)
	}
	if err := registerEvent(r, "x.y", 2, func(SessionEndedV2) error { return nil }, true); err != nil || r.Version("x.y") != 2 {
		t.Fatalf("version 2: %v", err)
	}
	if got := r.SchemaV("x.y", 3); got != nil {
		t.Fatalf("schema of an unregistered version: %s", got)
	}
}
