package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Version 4 contract: every frozen fixture decodes (lifted to the current
// version), re-encodes through the version-4 encoder to the same bytes,
// which validate against the frozen version-4 schema file, and decodes
// back to the same value; every kind of version 4 has a fixture.
func TestV4Fixtures(t *testing.T) {
	frozenSchema := frozenValidator(t, 4)
	seen := map[Kind]bool{}
	for _, path := range fixtures(t, 4) {
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
			// Byte-frozen at the version the fixture declares (4), also after
			// a bump, through that version's encoder.
			out, err := Encode(Capability{V: 4}, c)
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
		if !seen[k] && !v5Kinds[string(k)] {
			t.Errorf("no v4 fixture of kind %q", k)
		}
	}
}

// A version-3 document is a version-4 one: each v3 fixture and its v4 copy
// decode to the same command, and the version-3 encoder writes that
// command back as the v3 fixture, byte for byte.
func TestV3FixturesAreV4(t *testing.T) {
	for _, path := range fixtures(t, 3) {
		v3, err := Decode(readFile(t, path))
		if err != nil {
			t.Fatal(err)
		}
		v4, err := Decode(readFile(t, filepath.Join("testdata/v4", filepath.Base(path))))
		if err != nil || !reflect.DeepEqual(v3, v4) {
			t.Fatalf("%s: v3 and v4 decode differently (%v):\n v3 %+v\n v4 %+v", path, err, v3, v4)
		}
		out, err := encodeV3(v4)
		if want := bytes.TrimRight(readFile(t, path), "\n"); err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: v3 encoder (%v):\n got %s\nwant %s", path, err, out, want)
		}
	}
}

// The version-3 encoder refuses what version 3 cannot express — the kind
// terminate and its body — with ErrUnsupportedTarget naming the kind,
// never downgrading it; so do the version-2 and version-1 encoders.
func TestV3EncoderRefusesV4Content(t *testing.T) {
	for _, name := range []string{"terminate", "terminate-bare"} {
		c, err := Decode(readFile(t, "testdata/v4/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int{3, 2, 1} {
			_, err = Encode(Capability{V: v}, c)
			var we *Error
			if !errors.Is(err, ErrUnsupportedTarget) || !errors.As(err, &we) || we.Kind != string(KindTerminate) ||
				we.Version != v || we.CommandID != c.ID || !strings.Contains(we.Reason, `kind "terminate" needs inbox version 4`) {
				t.Errorf("%s for v%d: err = %#v, want ErrUnsupportedTarget naming kind terminate and version 4", name, v, err)
			}
		}
	}
	// A terminate body on another kind is refused as well (it is not
	// version 3), also an empty one.
	for _, body := range []*Terminate{{Message: "bye"}, {}} {
		c := validDeliver()
		c.Terminate = body
		for _, v := range []int{3, 2, 1} {
			if _, err := Encode(Capability{V: v}, c); !errors.Is(err, ErrUnsupportedTarget) {
				t.Errorf("a terminate body %+v for v%d: err = %v, want ErrUnsupportedTarget", body, v, err)
			}
		}
	}
}

// A document that declares version 3 (or 2, or 1) and uses what only
// version 4 has was never written by such a producer: it is rejected,
// not lifted.
func TestV3DocumentWithV4ContentIsRejected(t *testing.T) {
	for _, name := range []string{"terminate", "terminate-bare"} {
		for _, v := range []int{3, 2, 1} {
			raw := bytes.Replace(readFile(t, "testdata/v4/"+name+".json"), []byte(`{"v":4,`), []byte(fmt.Sprintf(`{"v":%d,`, v)), 1)
			_, err := Decode(raw)
			var we *Error
			if !errors.Is(err, ErrUnknownKind) || !errors.As(err, &we) || we.Version != v || we.Kind != string(KindTerminate) {
				t.Errorf("%s at v%d: err = %v, want ErrUnknownKind at v%d", name, v, err, v)
			}
		}
	}
	raw := bytes.Replace(readFile(t, "testdata/v3/cancel.json"), []byte(`"v":3,`), []byte(`"v":3,"terminate":{"message":"bye"},`), 1)
	_, err := Decode(raw)
	var we *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != 3 || !strings.Contains(we.Reason, "needs version 4") {
		t.Errorf("member terminate at v3: err = %v, want ErrInvalid at v3", err)
	}
}

func validTerminate() Command {
	c := validDeliver()
	c.Kind, c.Deliver = KindTerminate, nil
	c.Terminate = &Terminate{Message: "Thanks, that is all."}
	return c
}

// v4EncodeRejectCases are terminate commands Encode rejects.
var v4EncodeRejectCases = []struct {
	name string
	c    func() Command
}{
	{"long message", func() Command { c := validTerminate(); c.Terminate.Message = strings.Repeat("m", 257); return c }},
	{"message of 129 two-byte characters", func() Command {
		c := validTerminate()
		c.Terminate.Message = strings.Repeat("é", 129)
		return c
	}},
	{"message not UTF-8", func() Command { c := validTerminate(); c.Terminate.Message = "bye\xff"; return c }},
	{"a parent's", func() Command {
		c := validTerminate()
		c.ParentSessionID, c.Handle, c.Depth = "p", "h", 1
		return c
	}},
	{"a parent's, without a body", func() Command {
		c := validTerminate()
		c.Terminate, c.ParentSessionID, c.Handle, c.Depth = nil, "p", "h", 1
		return c
	}},
	{"handle alone", func() Command { c := validTerminate(); c.Handle = "h"; return c }},
	{"depth alone", func() Command { c := validTerminate(); c.Depth = 1; return c }},
	{"terminate body on a cancel", func() Command { c := validTerminate(); c.Kind = KindCancel; return c }},
	{"empty terminate body on a cancel", func() Command {
		c := validTerminate()
		c.Kind, c.Terminate = KindCancel, &Terminate{}
		return c
	}},
	{"terminate body on a delivery", func() Command { c := validDeliver(); c.Terminate = validTerminate().Terminate; return c }},
	{"terminate with a delivery body", func() Command { c := validTerminate(); c.Deliver = validDeliver().Deliver; return c }},
	{"terminate with only a delivery body", func() Command {
		c := validTerminate()
		c.Terminate, c.Deliver = nil, validDeliver().Deliver
		return c
	}},
	{"terminate with a tag body", func() Command { c := validTerminate(); c.Tag = validTag().Tag; return c }},
}

func TestV4EncodeRejects(t *testing.T) {
	for _, tt := range v4EncodeRejectCases {
		_, err := Encode(Current(), tt.c())
		var we *Error
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != CurrentVersion {
			t.Errorf("%s: err = %v, want ErrInvalid as *Error of v%d", tt.name, err, CurrentVersion)
		}
		if _, err := Encode(Capability{V: 4}, tt.c()); !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != 4 {
			t.Errorf("%s for v4: err = %v, want ErrInvalid as *Error of v4", tt.name, err)
		}
	}
	for name, change := range map[string]func(*Command){
		"as built":         func(*Command) {},
		"no body":          func(c *Command) { c.Terminate = nil },
		"empty body":       func(c *Command) { c.Terminate = &Terminate{} },
		"longest message":  func(c *Command) { c.Terminate.Message = strings.Repeat("m", MaxEndMessageBytes) },
		"longest in é":     func(c *Command) { c.Terminate.Message = strings.Repeat("é", MaxEndMessageBytes/2) },
		"lines and quotes": func(c *Command) { c.Terminate.Message = "done.\n\"Bye\" — Zoë" },
	} {
		c := validTerminate()
		change(&c)
		b, err := Encode(Current(), c)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := debugCheck(commandCurrent(), b); err != nil {
			t.Errorf("%s: encoded %s fails the schema: %v", name, b, err)
		}
	}
}

// A terminate body without a message is no body: Encode writes none, and
// Decode reads {} as none; Encode does not mutate its argument.
func TestTerminateEmptyBodyIsNone(t *testing.T) {
	c := validTerminate()
	c.Terminate = &Terminate{}
	b, err := Encode(Current(), c)
	if err != nil || bytes.Contains(b, []byte(`"terminate":`)) || c.Terminate == nil {
		t.Fatalf("encoded %s (%v); argument %+v", b, err, c.Terminate)
	}
	withEmpty := []byte(strings.TrimSuffix(string(b), "}") + `,"terminate":{}}`)
	for _, in := range [][]byte{b, withEmpty} {
		d, err := Decode(in)
		if err != nil || d.Terminate != nil || d.Kind != KindTerminate {
			t.Errorf("%s: decoded %+v, %v", in, d, err)
		}
	}
}

// v4DecodeRejectCases are version-4 payloads Decode rejects (also part of
// the corpus of TestSchemaAgreement).
var v4DecodeRejectCases = func() []struct{ name, in string } {
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	term := func(body string) string { return `{"v":4,"kind":"terminate",` + env + `,"terminate":` + body + `}` }
	return []struct{ name, in string }{
		{"body null", term(`null`)},
		{"body a string", term(`"bye"`)},
		{"body an array", term(`[]`)},
		{"message null", term(`{"message":null}`)},
		{"message empty", term(`{"message":""}`)},
		{"message a number", term(`{"message":1}`)},
		{"long message", term(`{"message":"` + strings.Repeat("m", 257) + `"}`)},
		{"message of 129 two-byte characters", term(`{"message":"` + strings.Repeat("é", 129) + `"}`)},
		{"message of 257 two-byte characters", term(`{"message":"` + strings.Repeat("é", 257) + `"}`)},
		{"unknown member", term(`{"message":"bye","reason":"done"}`)},
		{"case-folded member", term(`{"Message":"bye"}`)},
		{"repeated member", term(`{"message":"a","message":""}`)},
		{"a parent's", `{"v":4,"kind":"terminate",` + env + `,"parentSessionId":"p","handle":"h","depth":1}`},
		{"a parent's with a body", `{"v":4,"kind":"terminate",` + env + `,"parentSessionId":"p","handle":"h","depth":1,"terminate":{"message":"bye"}}`},
		{"handle alone", `{"v":4,"kind":"terminate",` + env + `,"handle":"h"}`},
		{"terminate body on a cancel", `{"v":4,"kind":"cancel",` + env + `,"terminate":{"message":"bye"}}`},
		{"empty terminate body on a cancel", `{"v":4,"kind":"cancel",` + env + `,"terminate":{}}`},
		{"empty terminate body on a tag", `{"v":4,"kind":"tag",` + env + `,"tag":{"remove":["a"]},"terminate":{}}`},
		{"terminate with a move body", `{"v":4,"kind":"terminate",` + env + `,"move":{"deploymentId":"d"}}`},
		{"terminate with a tag body", `{"v":4,"kind":"terminate",` + env + `,"terminate":{},"tag":{"remove":["a"]}}`},
		{"v3 terminate", `{"v":3,"kind":"terminate",` + env + `}`},
		{"v3 terminate member", `{"v":3,"kind":"cancel",` + env + `,"terminate":{}}`},
		{"v2 terminate", `{"v":2,"kind":"terminate",` + env + `,"terminate":{"message":"bye"}}`},
		{"v1 terminate", `{"v":1,"kind":"terminate",` + env + `}`},
	}
}()

func TestV4DecodeRejects(t *testing.T) {
	for _, tt := range v4DecodeRejectCases {
		_, err := Decode([]byte(tt.in))
		var we *Error
		if err == nil || !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want a *Error", tt.name, err)
		}
	}
}

// TestDecodeInputV4: the owner's view of a terminate command carries its
// message (never stored, nor sent to an agent).
func TestDecodeInputV4(t *testing.T) {
	const dep = "dep-2026-03-01"
	want := map[string]TurnInput{
		"terminate": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0T", Kind: KindTerminate, Caller: "slack:U42",
			EndMessage: "Thanks — that is all for today. Fermé ✓"},
		"terminate-bare": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0V", Kind: KindTerminate, Caller: "slack:U42"},
	}
	for name, w := range want {
		got := DecodeInput(9, readFile(t, "testdata/v4/"+name+".json"))
		w.Seq, w.Deployment = 9, dep
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
		if b, _ := json.Marshal(got); bytes.Contains(b, []byte("Thanks")) {
			t.Errorf("%s: the message is a member of TurnInput's JSON: %s", name, b)
		}
	}
}

// The schema's bound of a terminate message states MaxEndMessageBytes (in
// characters); Terminate.Validate is Encode's rule.
func TestTerminateMessageBound(t *testing.T) {
	var schema struct {
		Defs struct {
			Terminate struct {
				Properties map[string]struct {
					MaxLength int `json:"maxLength"`
					MinLength int `json:"minLength"`
				} `json:"properties"`
			}
		} `json:"$defs"`
	}
	if err := json.Unmarshal(CommandSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if m := schema.Defs.Terminate.Properties["message"]; m.MaxLength != MaxEndMessageBytes || m.MinLength != 1 {
		t.Errorf("schema of terminate.message: %+v, want minLength 1, maxLength %d", m, MaxEndMessageBytes)
	}
	for msg, ok := range map[string]bool{
		"": true, "bye": true, strings.Repeat("é", MaxEndMessageBytes/2): true,
		strings.Repeat("é", MaxEndMessageBytes/2+1): false, "\xff": false,
	} {
		err := (&Terminate{Message: msg}).Validate()
		if (err == nil) != ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q): %v", msg, err)
		}
	}
}
