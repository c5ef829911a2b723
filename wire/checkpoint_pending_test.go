package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// pendingSend is fullCheckpointV5's send, pending since the delegation was
// accepted.
func pendingSend() PendingSend {
	s := fullCheckpointV5().Sends[0]
	return PendingSend{Send: s, Since: s.Command.AcceptedAt}
}

// fullCheckpointV6 is fullCheckpointV5 with its child send pending (state
// version 6): the commit that staged it has been followed by others.
func fullCheckpointV6() Checkpoint {
	c := fullCheckpointV5()
	c.Sends = nil
	c.PendingSends = []PendingSend{pendingSend()}
	return c
}

// TestCheckpointV6Fixture: the frozen version 6 fixture is
// fullCheckpointV6; it decodes to the same value, its start time kept.
func TestCheckpointV6Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV6())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v6.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.StateV != 6 || len(d.PendingSends) != 1 || !d.PendingSends[0].Since.Equal(pendingSend().Since) ||
		d.PendingSends[0].Send.Alias != "child.sess-1.researcher.2" {
		t.Fatalf("decoded %+v, %v", d.PendingSends, err)
	}
	if again, err := EncodeCheckpoint(d); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v", err)
	}
}

// State version 6 is written only while a send is pending: the same
// checkpoint without one is version 5 and matches version 5's frozen
// schema, so an owner of version 5 reads it after a rollback.
func TestPendingSendsLowestVersion(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Checkpoint
		want int
	}{
		{"pending", fullCheckpointV6(), 6},
		{"none", fullCheckpointV5(), 5},
		{"empty", func() Checkpoint { c := fullCheckpointV5(); c.PendingSends = []PendingSend{}; return c }(), 5},
		{"pending on a plain session", func() Checkpoint { c := fullCheckpoint(); c.PendingSends = []PendingSend{pendingSend()}; return c }(), 6},
	} {
		b, err := EncodeCheckpoint(tt.c)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if v, _ := ReadStateVersion(b); v != tt.want {
			t.Errorf("%s: written at state version %d, want %d", tt.name, v, tt.want)
		}
		if err := debugCheck(checkpointContract(tt.want), b); err != nil {
			t.Errorf("%s: does not match the frozen schema of version %d: %v", tt.name, tt.want, err)
		}
	}
	b, _ := EncodeCheckpoint(fullCheckpointV6())
	if err := debugCheck(checkpointContract(5), b); err == nil {
		t.Error("a pending send matches version 5's frozen schema")
	}
	declared := strings.Replace(string(b), `"stateV":6`, `"stateV":5`, 1)
	if _, err := DecodeCheckpoint([]byte(declared)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a pending send declared at version 5: %v, want ErrInvalid", err)
	}
}

// A pending send is a child-creating send with a start time, once per
// command.
func TestPendingSendsRejects(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*PendingSend)
	}{
		{"no alias", func(p *PendingSend) { p.Send.Alias, p.Send.DeploymentID = "", "" }},
		{"no start time", func(p *PendingSend) { p.Since = time.Time{} }},
		{"bad receiver", func(p *PendingSend) { p.Send.SessionID = "a.b" }},
		{"no command", func(p *PendingSend) { p.Send.Command.ID = "" }},
	} {
		c := fullCheckpointV6()
		tt.change(&c.PendingSends[0])
		if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
	c := fullCheckpointV6()
	c.PendingSends = append(c.PendingSends, pendingSend())
	if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrInvalid) {
		t.Errorf("a command pending twice: %v, want ErrInvalid", err)
	}
}

// child.completed is written at data version 2 only with an error
// (LowestChildCompleted); version 1 refuses an error, version 2 any code
// but a failed delegation's.
func TestChildCompletedVersions(t *testing.T) {
	reg := DefaultEvents()
	d := ChildCompleted{Handle: "h", ChildSessionID: "s", TurnID: "none", Outcome: ChildFailed}
	if b := LowestChildCompleted(d, nil); DataVersionOf(b) != 1 {
		t.Errorf("without an error: data version %d, want 1", DataVersionOf(b))
	}
	e := &ChildError{Code: CodeChildUnavailable, Message: "no owner of deployment gray answered"}
	b := LowestChildCompleted(d, e)
	if DataVersionOf(b) != 2 || b.EventKind() != EventChildCompleted {
		t.Fatalf("with an error: %T at data version %d, want 2", b, DataVersionOf(b))
	}
	ev, err := NewBodyEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	ev.SessionID, ev.Seq, ev.OwnerRunID, ev.DeploymentID, ev.Time = "s", 1, "run", "dep", envelope(EventChildCompleted, nil).Time
	if _, err := EncodeEvent(reg, ev); err != nil {
		t.Fatalf("version 2 refused: %v", err)
	}
	v1 := envelope(EventChildCompleted, b)
	v1.V = 1
	if _, err := EncodeEvent(reg, v1); !errors.Is(err, ErrInvalid) {
		t.Errorf("an error in data version 1 accepted: %v", err)
	}
	bad := envelope(EventChildCompleted, ChildCompletedV2{Handle: "h", ChildSessionID: "s", TurnID: "none", Outcome: ChildFailed,
		Error: &ChildError{Code: "step_failed", Message: "x"}})
	bad.V = 2
	if _, err := EncodeEvent(reg, bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("code step_failed accepted: %v", err)
	}
	if reg.Version(EventChildCompleted) != 2 {
		t.Errorf("child.completed newest data version %d, want 2", reg.Version(EventChildCompleted))
	}
}

// ChildErrorOf reads back what ChildErrorText writes, for a failed
// delegation's codes only.
func TestChildErrorOf(t *testing.T) {
	for _, tt := range []struct {
		outcome, text string
		want          *ChildError
	}{
		{ChildFailed, ChildErrorText(CodeChildUnavailable, "no owner"), &ChildError{Code: CodeChildUnavailable, Message: "no owner"}},
		{ChildFailed, ChildErrorText(CodeChildGone, "ended"), &ChildError{Code: CodeChildGone, Message: "ended"}},
		{ChildFailed, "step_timeout: too slow", nil},
		{ChildFailed, "", nil},
		{ChildCancelled, ChildErrorText(CodeChildUnavailable, "no owner"), nil},
	} {
		got := ChildErrorOf(tt.outcome, tt.text)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("ChildErrorOf(%s, %q) = %+v, want %+v", tt.outcome, tt.text, got, tt.want)
		}
	}
}

// genPending adds the content of state version 6 to c (for
// TestCheckpointEncodeAgreement), with the field of fault (27..30)
// perturbed.
func genPending(c *Checkpoint, fault int) {
	p := PendingSend{Send: Send{SessionID: "s3", DeploymentID: "d2", Alias: "child.s1.h3.1", Command: validDeliver()},
		Since: time.Unix(1700000000, 0)}
	switch fault {
	case 27:
		p.Send.Alias = ""
	case 28:
		p.Since = time.Time{}
	case 29:
		p.Send.SessionID = ""
	case 30:
		p.Send.DeploymentID = ""
	}
	c.PendingSends = []PendingSend{p}
}
