package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// fullCheckpointV8 is the checkpoint a user's terminate leaves (state
// version 8): a tagged session ended terminated, its waits and turn gone,
// command.applied and session.ended {terminated, by user, message} in its
// outbox.
func fullCheckpointV8() Checkpoint {
	c := fullCheckpoint()
	c.Tags = sessionTags()
	c.Ended = EndTerminated
	c.Waits, c.Timer, c.Turn = Waits{}, nil, TurnState{Count: 3}
	applied := envelope(EventCommandApplied, CommandApplied{CommandID: "c11", Seq: 46, Kind: string(KindTerminate)})
	applied.SessionID, applied.Seq = "sess-1", 11
	ended, err := NewBodyEvent(LowestSessionEndedBy(EndTerminated, EndedByUser, "Thanks — that is all for today."))
	if err != nil {
		panic(err)
	}
	ended.SessionID, ended.Seq, ended.Time, ended.OwnerRunID, ended.DeploymentID = "sess-1", 12, applied.Time, "run-1", "dep-1"
	c.Outbox = []Event{applied, ended}
	c.Applied = Applied{Low: 47, IDs: []string{"c0", "c1", "c11"}}
	return c
}

// TestCheckpointV8Fixture: the frozen version 8 fixture is
// fullCheckpointV8; it decodes to the same value.
func TestCheckpointV8Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV8())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v8.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.StateV != EndStateVersion || d.Ended != EndTerminated || d.Outbox[1].V != 4 {
		t.Fatalf("decoded stateV %d ended %q, %v", d.StateV, d.Ended, err)
	}
	if again, err := EncodeCheckpoint(d); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v", err)
	}
}

// State version 8 is written only for the end reasons terminated and
// idle_expired: any other end, or none, keeps the version the content had
// before, byte for byte as the shipped code writes it (the frozen
// fixtures), so an owner of that version reads it after a rollback. With
// the new reasons, version 7's frozen schema refuses the checkpoint, and so
// does DecodeCheckpoint when it declares 7.
func TestEndsLowestVersion(t *testing.T) {
	for _, tt := range []struct {
		name    string
		c       Checkpoint
		want    int
		fixture string // the shipped encoding ("" for none)
	}{
		{"plain", fullCheckpoint(), 1, ""},
		{"agent API", fullCheckpointV3(), 3, "testdata/checkpoint/state_v3.json"},
		{"subagents", fullCheckpointV5(), 5, "testdata/checkpoint/state_v5.json"},
		{"pending send", fullCheckpointV6(), 6, "testdata/checkpoint/state_v6.json"},
		{"tags", fullCheckpointV7(), 7, "testdata/checkpoint/state_v7.json"},
	} {
		for _, end := range []string{"", EndDone, EndExpired, EndFailed, EndClosed} {
			c := tt.c
			c.Ended = end
			b, err := EncodeCheckpoint(c)
			if err != nil {
				t.Fatalf("%s ended %q: %v", tt.name, end, err)
			}
			want := tt.want
			if end == EndClosed {
				want = max(want, 5) // closed is a child's end (state version 5)
			}
			if v, _ := ReadStateVersion(b); v != want {
				t.Errorf("%s ended %q: state version %d, want %d", tt.name, end, v, want)
			}
			if end != "" || tt.fixture == "" {
				continue
			}
			if fixture := bytes.TrimRight(readFile(t, tt.fixture), "\n"); !bytes.Equal(b, fixture) {
				t.Errorf("%s is not what the shipped code writes:\n got %s\nwant %s", tt.name, b, fixture)
			}
		}
		for _, end := range []string{EndTerminated, EndIdleExpired} {
			c := tt.c
			c.Ended = end
			b, err := EncodeCheckpoint(c)
			if err != nil {
				t.Fatalf("%s ended %s: %v", tt.name, end, err)
			}
			if v, _ := ReadStateVersion(b); v != EndStateVersion {
				t.Errorf("%s ended %s: state version %d, want %d", tt.name, end, v, EndStateVersion)
			}
			if err := debugCheck(checkpointContract(8), b); err != nil {
				t.Errorf("%s ended %s: the version-8 schema refuses it: %v", tt.name, end, err)
			}
			if err := debugCheck(checkpointContract(7), b); err == nil {
				t.Errorf("%s ended %s matches version 7's frozen schema", tt.name, end)
			}
			declared := strings.Replace(string(b), `"stateV":8`, `"stateV":7`, 1)
			if _, err := DecodeCheckpoint([]byte(declared)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s ended %s declared at version 7: %v, want ErrInvalid", tt.name, end, err)
			}
			n := normalizeCheckpoint(c)
			n.StateV = 7
			if err := n.validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs state version 8") {
				t.Errorf("%s: the Go rules accept ended %s at version 7: %v", tt.name, end, err)
			}
		}
	}
}

// An end reason no state version knows is refused, at every version.
func TestCheckpointRefusesUnknownEnd(t *testing.T) {
	for _, end := range []string{"cancelled", "bored", "Terminated"} {
		c := fullCheckpoint()
		c.Ended = end
		if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("ended %q: %v, want ErrInvalid", end, err)
		}
	}
	b, _ := EncodeCheckpoint(fullCheckpointV8())
	for _, end := range []string{"cancelled", "bored"} {
		other := strings.Replace(string(b), `"ended":"terminated"`, `"ended":"`+end+`"`, 1)
		if _, err := DecodeCheckpoint([]byte(other)); !errors.Is(err, ErrInvalid) {
			t.Errorf("decoded ended %q: %v, want ErrInvalid", end, err)
		}
	}
}

// A terminate command is a user's, applied at once: a checkpoint never
// sends, stores or admits it into a turn.
func TestCheckpointRefusesTerminateCommands(t *testing.T) {
	term := validTerminate()
	for name, change := range map[string]func(*Checkpoint){
		"send": func(c *Checkpoint) { c.Sends = []Send{{SessionID: "sess-2", Command: term}} },
		"send without a body": func(c *Checkpoint) {
			bare := term
			bare.Terminate = nil
			c.Sends = []Send{{SessionID: "sess-2", Command: bare}}
		},
		"pending send": func(c *Checkpoint) {
			p := pendingSend()
			p.Send.Command = term
			c.PendingSends = []PendingSend{p}
		},
		"terminate body on a send": func(c *Checkpoint) {
			s := fullCheckpointV5().Sends[0]
			s.Command.Terminate = term.Terminate
			c.Sends = []Send{s}
		},
		"turn input": func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Inputs: []TurnInput{term.Input(50)}}
		},
	} {
		c := fullCheckpoint()
		change(&c)
		_, err := EncodeCheckpoint(c)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "applied at once") {
			t.Errorf("%s: err = %v, want ErrInvalid (a terminate command is applied at once)", name, err)
		}
	}
	b, _ := EncodeCheckpoint(fullCheckpointV7())
	for _, change := range []string{`"command":{"v":2,"kind":"terminate",`, `"command":{"v":2,"terminate":{"message":"x"},`} {
		other := bytes.Replace(b, []byte(`"command":{"v":2,"kind":"cancel",`), []byte(change), 1)
		if bytes.Equal(other, b) {
			t.Fatal("no stored command to change")
		}
		if _, err := DecodeCheckpoint(other); !errors.Is(err, ErrInvalid) {
			t.Errorf("a stored command %s…: %v, want ErrInvalid", change, err)
		}
	}
}
