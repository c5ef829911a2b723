package wire

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Version 2 contract: every frozen fixture decodes (lifted to the current
// version), re-encodes through the version-2 encoder to the same bytes,
// which validate against the frozen version-2 schema file, and decodes
// back to the same value; every kind of version 2 has a fixture.
func TestV2Fixtures(t *testing.T) {
	frozenSchema := frozenValidator(t, 2)
	seen := map[Kind]bool{}
	for _, path := range fixtures(t, 2) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw := readFile(t, path)
			c, err := Decode(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			seen[c.Kind] = true
			if c.V != CurrentVersion {
				t.Fatalf("decoded V = %d, want %d", c.V, CurrentVersion)
			}
			// Byte-frozen at the version the fixture declares (2), also after
			// a bump, through that version's encoder.
			out, err := Encode(Capability{V: 2}, c)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if want := bytes.TrimRight(raw, "\n"); !bytes.Equal(out, want) {
				t.Fatalf("encode is not byte-frozen:\n got %s\nwant %s", out, want)
			}
			doc, _ := parseDoc(out)
			if err := frozenSchema.Validate(doc); err != nil {
				t.Fatalf("encoded value fails the frozen schema: %v", err)
			}
			back, err := Decode(out)
			if err != nil || !reflect.DeepEqual(back, c) {
				t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, c)
			}
		})
	}
	for _, k := range Kinds() {
		if !seen[k] && !v3Kinds[string(k)] && !v4Kinds[string(k)] && !v5Kinds[string(k)] {
			t.Errorf("no v2 fixture of kind %q", k)
		}
	}
}

// A version-1 document is a version-2 one: each v1 fixture and its v2 copy
// decode to the same command, and the version-1 encoder writes that
// command back as the v1 fixture.
func TestV1FixturesAreV2(t *testing.T) {
	for _, path := range fixtures(t, 1) {
		v1, err := Decode(readFile(t, path))
		if err != nil {
			t.Fatal(err)
		}
		v2, err := Decode(readFile(t, filepath.Join("testdata/v2", filepath.Base(path))))
		if err != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%s: v1 and v2 decode differently (%v):\n v1 %+v\n v2 %+v", path, err, v1, v2)
		}
		out, err := Encode(Capability{V: 1}, v2)
		if want := bytes.TrimRight(readFile(t, path), "\n"); err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: v1 encoder (%v):\n got %s\nwant %s", path, err, out, want)
		}
	}
}

// The version-1 encoder refuses what version 1 cannot express — the kinds
// and the envelope members of version 2 — with ErrUnsupportedTarget
// naming the kind, never downgrading it.
func TestV1EncoderRefusesV2Content(t *testing.T) {
	for _, name := range []string{"child.result", "child.result-failed", "child.waiting", "child.waiting-auth",
		"child.resumed", "end", "deliver-parent", "cancel-parent"} {
		c, err := Decode(readFile(t, "testdata/v2/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Encode(Capability{V: 1}, c)
		var we *Error
		if !errors.Is(err, ErrUnsupportedTarget) || !errors.As(err, &we) || we.Kind != string(c.Kind) || we.Version != 1 || we.CommandID != c.ID {
			t.Errorf("%s: err = %#v, want ErrUnsupportedTarget for v1 naming kind %q", name, err, c.Kind)
		}
	}
}

// A document that declares version 1 and uses what only version 2 has was
// never written by a version-1 producer: it is rejected, not lifted.
func TestV1DocumentWithV2ContentIsRejected(t *testing.T) {
	for _, name := range []string{"child.result", "end", "deliver-parent", "cancel-parent"} {
		raw := bytes.Replace(readFile(t, "testdata/v2/"+name+".json"), []byte(`{"v":2,`), []byte(`{"v":1,`), 1)
		_, err := Decode(raw)
		var we *Error
		if !errors.As(err, &we) || we.Version != 1 || !(errors.Is(err, ErrUnknownKind) || errors.Is(err, ErrInvalid)) {
			t.Errorf("%s at v1: err = %v", name, err)
		}
	}
}

func validChildResult() Command {
	c := validDeliver()
	c.Kind, c.Deliver = KindChildResult, nil
	c.ChildResult = &ChildResult{Handle: "h", ChildSessionID: "s2", CommandID: "c0", TurnID: "t1", Outcome: ChildDone}
	return c
}

func validChildWaiting(kind Kind) Command {
	c := validDeliver()
	c.Kind, c.Deliver = kind, nil
	w := &ChildWaiting{Handle: "h", ChildSessionID: "s2", RequestID: "r1"}
	if kind == KindChildResumed {
		c.ChildResumed = w
	} else {
		c.ChildWaiting = w
	}
	return c
}

// v2EncodeRejectCases are commands of version 2's rules that Encode
// rejects.
var v2EncodeRejectCases = []struct {
	name string
	c    func() Command
}{
	{"parent without handle", func() Command { c := validDeliver(); c.ParentSessionID, c.Depth = "p", 1; return c }},
	{"parent without depth", func() Command { c := validDeliver(); c.ParentSessionID, c.Handle = "p", "h"; return c }},
	{"handle alone", func() Command { c := validDeliver(); c.Handle = "h"; return c }},
	{"depth alone", func() Command { c := validDeliver(); c.Depth = 1; return c }},
	{"depth over MaxDepth", func() Command {
		c := validDeliver()
		c.ParentSessionID, c.Handle, c.Depth = "p", "h", MaxDepth+1
		return c
	}},
	{"negative depth", func() Command { c := validDeliver(); c.ParentSessionID, c.Handle, c.Depth = "p", "h", -1; return c }},
	{"bad parent id", func() Command { c := validDeliver(); c.ParentSessionID, c.Handle, c.Depth = "a.b", "h", 1; return c }},
	{"long handle", func() Command {
		c := validDeliver()
		c.ParentSessionID, c.Handle, c.Depth = "p", strings.Repeat("h", 65), 1
		return c
	}},
	{"end with body", func() Command { c := validDeliver(); c.Kind = KindEnd; return c }},
	{"child body on deliver", func() Command { c := validDeliver(); c.ChildResult = validChildResult().ChildResult; return c }},
	{"child.result without body", func() Command { c := validChildResult(); c.ChildResult = nil; return c }},
	{"child.result bad outcome", func() Command { c := validChildResult(); c.ChildResult.Outcome = "maybe"; return c }},
	{"child.result no handle", func() Command { c := validChildResult(); c.ChildResult.Handle = ""; return c }},
	{"child.result bad session", func() Command { c := validChildResult(); c.ChildResult.ChildSessionID = "a b"; return c }},
	{"child.result no command", func() Command { c := validChildResult(); c.ChildResult.CommandID = ""; return c }},
	{"child.result long turn", func() Command { c := validChildResult(); c.ChildResult.TurnID = strings.Repeat("t", 129); return c }},
	{"child.result negative usage", func() Command { c := validChildResult(); c.ChildResult.Usage.InputTokens = -1; return c }},
	{"child.result long ended", func() Command { c := validChildResult(); c.ChildResult.Ended = strings.Repeat("e", 65); return c }},
	{"child.waiting both", func() Command { c := validChildWaiting(KindChildWaiting); c.ChildWaiting.AttemptID = "a"; return c }},
	{"child.waiting neither", func() Command { c := validChildWaiting(KindChildWaiting); c.ChildWaiting.RequestID = ""; return c }},
	{"child.resumed both", func() Command { c := validChildWaiting(KindChildResumed); c.ChildResumed.AttemptID = "a"; return c }},
	{"child.resumed with waiting body", func() Command {
		c := validChildWaiting(KindChildResumed)
		c.ChildWaiting, c.ChildResumed = c.ChildResumed, nil
		return c
	}},
}

func TestV2EncodeRejects(t *testing.T) {
	for _, tt := range v2EncodeRejectCases {
		_, err := Encode(Current(), tt.c())
		var we *Error
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want ErrInvalid as *Error", tt.name, err)
		}
	}
	for _, c := range []Command{validChildResult(), validChildWaiting(KindChildWaiting), validChildWaiting(KindChildResumed)} {
		if _, err := Encode(Current(), c); err != nil {
			t.Errorf("%s: %v", c.Kind, err)
		}
	}
}

// v2DecodeRejectCases are version-2 payloads Decode rejects (also part of
// the corpus of TestSchemaAgreement).
var v2DecodeRejectCases = func() []struct{ name, in string } {
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	const parent = `"parentSessionId":"p1","handle":"h","depth":1`
	const result = `"handle":"h","childSessionId":"s2","commandId":"c0","turnId":"t1","outcome":"done"`
	const wait = `"handle":"h","childSessionId":"s2"`
	return []struct{ name, in string }{
		{"empty parent", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"","handle":"h","depth":1}`},
		{"depth zero", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p1","handle":"h","depth":0}`},
		{"depth float", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p1","handle":"h","depth":1.0}`},
		{"depth string", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p1","handle":"h","depth":"1"}`},
		{"depth five", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p1","handle":"h","depth":5}`},
		{"handle only", `{"v":2,"kind":"cancel",` + env + `,"handle":"h"}`},
		{"parent null", `{"v":2,"kind":"cancel",` + env + `,"parentSessionId":null,"handle":"h","depth":1}`},
		{"end with body", `{"v":2,"kind":"end",` + env + `,` + parent + `,"childResult":{` + result + `}}`},
		{"result without body", `{"v":2,"kind":"child.result",` + env + `}`},
		{"result missing outcome", `{"v":2,"kind":"child.result",` + env + `,"childResult":{"handle":"h","childSessionId":"s2","commandId":"c0","turnId":"t1"}}`},
		{"result outputs null", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"outputs":null}}`},
		{"result outputs number", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"outputs":[1]}}`},
		{"result empty error", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"error":""}}`},
		{"result empty ended", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"ended":""}}`},
		{"result usage float tokens", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"usage":{"inputTokens":1.5}}}`},
		{"result usage negative", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"usage":{"costUsd":-1}}}`},
		{"result usage huge", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"usage":{"costUsd":1e400}}}`},
		{"result usage unknown", `{"v":2,"kind":"child.result",` + env + `,"childResult":{` + result + `,"usage":{"tokens":1}}}`},
		{"waiting both", `{"v":2,"kind":"child.waiting",` + env + `,"childWaiting":{` + wait + `,"requestId":"r","attemptId":"a"}}`},
		{"waiting neither", `{"v":2,"kind":"child.waiting",` + env + `,"childWaiting":{` + wait + `,"question":"q"}}`},
		{"waiting empty request", `{"v":2,"kind":"child.waiting",` + env + `,"childWaiting":{` + wait + `,"requestId":"","attemptId":"a"}}`},
		{"resumed as waiting", `{"v":2,"kind":"child.resumed",` + env + `,"childWaiting":{` + wait + `,"requestId":"r"}}`},
		{"v1 with parent", `{"v":1,"kind":"cancel",` + env + `,` + parent + `}`},
		{"v1 end", `{"v":1,"kind":"end",` + env + `}`},
		{"v1 child.waiting", `{"v":1,"kind":"child.waiting",` + env + `,"childWaiting":{` + wait + `,"requestId":"r"}}`},
	}
}()

func TestV2DecodeRejects(t *testing.T) {
	for _, tt := range v2DecodeRejectCases {
		_, err := Decode([]byte(tt.in))
		var we *Error
		if err == nil || !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want a *Error", tt.name, err)
		}
	}
}

// TestDecodeInputV2: the owner's view of version 2's commands carries the
// parent reference and the child's body.
func TestDecodeInputV2(t *testing.T) {
	const dep = "dep-2026-03-01"
	parent := &ParentRef{SessionID: "01JNV9PARENT0000000000000A", Handle: "researcher", Depth: 1}
	const child = "01JNV9CHILD00000000000000A"
	want := map[string]TurnInput{
		"child.result": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0E", Kind: KindChildResult, Child: &ChildRef{Handle: "researcher", SessionID: child,
			CommandID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0F", TurnID: "turn-1", Outcome: ChildDone,
			Outputs: []string{"Lisbon: 21°C, sunny.", "Porto: 18°C, cloudy."},
			Usage:   Usage{InputTokens: 1200, OutputTokens: 85, CachedTokens: 400, CostUSD: 0.0042}}},
		"child.result-failed": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0G", Kind: KindChildResult, Child: &ChildRef{Handle: "researcher", SessionID: child,
			CommandID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0H", TurnID: "turn-2", Outcome: ChildFailed, Error: "model unavailable", Ended: EndFailed}},
		"child.waiting": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0J", Kind: KindChildWaiting, RequestID: "req-7",
			Child: &ChildRef{Handle: "researcher", SessionID: child, Question: "Which city?"}},
		"child.waiting-auth": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0K", Kind: KindChildWaiting, AttemptID: "att-3",
			Child: &ChildRef{Handle: "mailer", SessionID: "01JNV9CHILD00000000000000B"}},
		"child.resumed": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0M", Kind: KindChildResumed, RequestID: "req-7",
			Child: &ChildRef{Handle: "researcher", SessionID: child}},
		"end": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0N", Kind: KindEnd, Parent: parent},
		"deliver-parent": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0P", Kind: KindDeliver, Mode: ModeQueue, Caller: "session:01JNV9PARENT0000000000000A",
			Text: "Find the weather in Lisbon and Porto.", Parent: parent},
		"cancel-parent": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0Q", Kind: KindCancel, Parent: &ParentRef{SessionID: parent.SessionID, Handle: "researcher", Depth: 2}},
	}
	for name, w := range want {
		got := DecodeInput(9, readFile(t, "testdata/v2/"+name+".json"))
		w.Seq, w.Deployment = 9, dep
		got.Payloads = nil
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
}
