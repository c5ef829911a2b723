package protocol_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/baton-rt/baton/protocol"
)

func TestDecodeStart(t *testing.T) {
	cases := []struct {
		name string
		body string
		kind protocol.StartKind
		err  bool
	}{
		{"session", `{"deploymentId":"green","aliases":["x"]}`, protocol.StartSession, false},
		{"session ignores unknown fields", `{"deploymentId":"green","future":1}`, protocol.StartSession, false},
		{"empty handoffId is a session start", `{"deploymentId":"green","handoffId":""}`, protocol.StartSession, false},
		{"handoff", `{"deploymentId":"green","handoffId":"h1","sessionId":"s1","expectedRevision":7}`, protocol.StartHandoff, false},
		{"handoff refuses unknown fields", `{"handoffId":"h1","extra":1}`, protocol.StartHandoff, true},
		{"handoff refuses session fields", `{"handoffId":"h1","aliases":["x"]}`, protocol.StartHandoff, true},
		{"not JSON", `nope`, protocol.StartSession, true},
		{"handoffId of another type", `{"handoffId":5}`, protocol.StartSession, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := protocol.DecodeStart([]byte(c.body))
			if got.Kind != c.kind || (err != nil) != c.err {
				t.Fatalf("kind %v err %v, want kind %v err %v", got.Kind, err, c.kind, c.err)
			}
			if err != nil && !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestDecodeHandoffStartNeedsHandoffID(t *testing.T) {
	if _, err := protocol.DecodeHandoffStart([]byte(`{"deploymentId":"green"}`)); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("got %v", err)
	}
}

func TestReplyError(t *testing.T) {
	e := protocol.Refuse(protocol.CodeRefused, errors.New("stale"))
	if e.Error() != "refused: stale" {
		t.Fatalf("Error() = %q", e.Error())
	}
	var err error = e
	var re *protocol.ReplyError
	if !errors.As(err, &re) || re.Code != protocol.CodeRefused {
		t.Fatalf("As: %v", err)
	}
}

// FuzzDecodeStart: never panics; a decoded start encodes to a body that
// decodes to the same start.
func FuzzDecodeStart(f *testing.F) {
	for _, s := range []string{`{"deploymentId":"g"}`, `{"handoffId":"h","sessionId":"s","expectedRevision":1}`, `{"aliases":["a"],"handoffId":""}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := protocol.DecodeStart(data)
		if err != nil {
			return
		}
		var body any = st.Session
		if st.Kind == protocol.StartHandoff {
			body = st.Handoff
		}
		enc, _ := json.Marshal(body)
		again, err := protocol.DecodeStart(enc)
		if err != nil || again.Kind != st.Kind || again.Handoff != st.Handoff || len(again.Session.Aliases) != len(st.Session.Aliases) {
			t.Fatalf("%s → %+v → %s → %+v %v", data, st, enc, again, err)
		}
	})
}
