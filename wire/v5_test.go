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

// Version 5 contract: every frozen fixture decodes, re-encodes to the same
// bytes, declares the current version, validates against the frozen schema
// file and decodes back to the same value; every kind has a fixture.
func TestV5Fixtures(t *testing.T) {
	frozenSchema := frozenValidator(t, 5)
	seen := map[Kind]bool{}
	for _, path := range fixtures(t, 5) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw := readFile(t, path)
			c, err := Decode(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			seen[c.Kind] = true
			if c.V != 5 {
				t.Fatalf("decoded V = %d, want 5", c.V)
			}
			out, err := Encode(Capability{V: 5}, c)
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
		if !seen[k] {
			t.Errorf("no v5 fixture of kind %q", k)
		}
	}
	// Every mode has a delivery fixture, and so has a delivery without one.
	for _, m := range append(Modes(), "") {
		name := "deliver-" + m
		switch m {
		case ModeQueue:
			name = "deliver"
		case "":
			name = "deliver-default"
		}
		c, err := Decode(readFile(t, "testdata/v5/"+name+".json"))
		if err != nil || c.Deliver == nil || c.Deliver.Mode != m {
			t.Errorf("fixture %s: %+v %v, want a delivery of mode %q", name, c.Deliver, err, m)
		}
	}
}

// A version-4 document is a version-5 one: each v4 fixture and its v5 copy
// decode to the same command, and the version-4 encoder writes that
// command back as the v4 fixture, byte for byte.
func TestV4FixturesAreV5(t *testing.T) {
	for _, path := range fixtures(t, 4) {
		v4, err := Decode(readFile(t, path))
		if err != nil {
			t.Fatal(err)
		}
		v5, err := Decode(readFile(t, filepath.Join("testdata/v5", filepath.Base(path))))
		if err != nil || !reflect.DeepEqual(v4, v5) {
			t.Fatalf("%s: v4 and v5 decode differently (%v):\n v4 %+v\n v5 %+v", path, err, v4, v5)
		}
		out, err := encodeV4(v5)
		if want := bytes.TrimRight(readFile(t, path), "\n"); err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: v4 encoder (%v):\n got %s\nwant %s", path, err, out, want)
		}
	}
}

// v5Only are the fixtures of what only version 5 expresses: the busy modes
// and the kind configure.
var v5Only = []string{"deliver-reject", "deliver-interrupt", "deliver-rollback", "deliver-debounce", "deliver-latest",
	"configure", "configure-queue"}

// The version-4 encoder refuses what version 4 cannot express — the kind
// configure, a busy mode, debounceMs — with ErrUnsupportedTarget naming the
// kind and version 5, never downgrading it; so do the version-3, version-2
// and version-1 encoders.
func TestV4EncoderRefusesV5Content(t *testing.T) {
	for _, name := range v5Only {
		c, err := Decode(readFile(t, "testdata/v5/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int{4, 3, 2, 1} {
			out, err := Encode(Capability{V: v}, c)
			var we *Error
			if out != nil || !errors.Is(err, ErrUnsupportedTarget) || !errors.As(err, &we) || we.Kind != string(c.Kind) ||
				we.Version != v || we.CommandID != c.ID || !strings.Contains(we.Reason, "needs inbox version 5") {
				t.Errorf("%s for v%d: %s, err = %#v, want ErrUnsupportedTarget naming version 5", name, v, out, err)
			}
		}
	}
	for name, change := range map[string]func(*Command){
		"configure body on a cancel": func(c *Command) {
			c.Kind, c.Deliver, c.Configure = KindCancel, nil, &Configure{DefaultMode: ModeQueue}
		},
		"configure body on a delivery": func(c *Command) { c.Configure = &Configure{DefaultMode: ModeQueue} },
		"debounceMs with mode queue":   func(c *Command) { c.Deliver.DebounceMs = 500 },
		"debounceMs without a mode":    func(c *Command) { c.Deliver.Mode, c.Deliver.DebounceMs = "", 500 },
		"unknown mode":                 func(c *Command) { c.Deliver.Mode = "later" },
	} {
		c := validDeliver()
		change(&c)
		for _, v := range []int{4, 3, 2, 1} {
			if out, err := Encode(Capability{V: v}, c); !errors.Is(err, ErrUnsupportedTarget) {
				t.Errorf("%s for v%d: %s, err = %v, want ErrUnsupportedTarget", name, v, out, err)
			}
		}
	}
}

// A delivery without a mode is the session's default; versions 1 to 4
// require a mode, and every session an owner of those versions holds
// defaults to queue, so their encoders write it as queue (the frozen
// schema of each accepts it), without changing the caller's command.
func TestLegacyEncodersWriteDefaultModeAsQueue(t *testing.T) {
	c, err := Decode(readFile(t, "testdata/v5/deliver-default.json"))
	if err != nil || c.Deliver.Mode != "" {
		t.Fatalf("%+v %v", c.Deliver, err)
	}
	for _, v := range []int{4, 3, 2, 1} {
		out, err := Encode(Capability{V: v}, c)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !bytes.HasPrefix(out, []byte(fmt.Sprintf(`{"v":%d,`, v))) || !bytes.Contains(out, []byte(`"deliver":{"mode":"queue","payloads":`)) {
			t.Errorf("v%d: %s, want mode queue", v, out)
		}
		doc, _ := parseDoc(out)
		if err := frozenValidator(t, v).Validate(doc); err != nil {
			t.Errorf("v%d: the frozen schema refuses %s: %v", v, out, err)
		}
		back, err := Decode(out)
		if err != nil || back.Deliver.Mode != ModeQueue {
			t.Errorf("v%d: decoded %+v, %v", v, back.Deliver, err)
		}
	}
	if c.Deliver.Mode != "" {
		t.Errorf("Encode changed its argument's mode to %q", c.Deliver.Mode)
	}
	// The current encoder keeps the mode out.
	if out, err := Encode(Current(), c); err != nil || bytes.Contains(out, []byte(`"mode"`)) {
		t.Errorf("v5: %s %v", out, err)
	}
}

// A document that declares version 4 (or 3, 2, 1) and uses what only
// version 5 has — the kind configure, its body, a busy mode, debounceMs,
// or a delivery without a mode — was never written by such a producer: it
// is rejected, not lifted.
func TestV4DocumentWithV5ContentIsRejected(t *testing.T) {
	for _, name := range append(v5Only, "deliver-default") {
		want := ErrInvalid
		if strings.HasPrefix(name, "configure") {
			want = ErrUnknownKind
		}
		for _, v := range []int{4, 3, 2, 1} {
			raw := bytes.Replace(readFile(t, "testdata/v5/"+name+".json"), []byte(`{"v":5,`), []byte(fmt.Sprintf(`{"v":%d,`, v)), 1)
			_, err := Decode(raw)
			var we *Error
			if !errors.Is(err, want) || !errors.As(err, &we) || we.Version != v {
				t.Errorf("%s at v%d: err = %v, want %v at v%d", name, v, err, want, v)
			}
		}
	}
	raw := bytes.Replace(readFile(t, "testdata/v4/cancel.json"), []byte(`"v":4,`), []byte(`"v":4,"configure":{"defaultMode":"queue"},`), 1)
	_, err := Decode(raw)
	var we *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != 4 || !strings.Contains(we.Reason, "needs version 5") {
		t.Errorf("member configure at v4: err = %v, want ErrInvalid at v4", err)
	}
}

func validConfigure() Command {
	c := validDeliver()
	c.Kind, c.Deliver = KindConfigure, nil
	c.Configure = &Configure{DefaultMode: ModeDebounce, DefaultDebounceMs: 2000}
	return c
}

func validDebounce() Command {
	c := validDeliver()
	c.Deliver.Mode, c.Deliver.DebounceMs = ModeDebounce, 1500
	return c
}

// v5EncodeRejectCases are busy-mode and configure commands Encode rejects.
var v5EncodeRejectCases = []struct {
	name string
	c    func() Command
}{
	{"debounce without debounceMs", func() Command { c := validDebounce(); c.Deliver.DebounceMs = 0; return c }},
	{"debounceMs 100", func() Command { c := validDebounce(); c.Deliver.DebounceMs = 100; return c }},
	{"debounceMs 249", func() Command { c := validDebounce(); c.Deliver.DebounceMs = MinDebounceMs - 1; return c }},
	{"debounceMs 600001", func() Command { c := validDebounce(); c.Deliver.DebounceMs = MaxDebounceMs + 1; return c }},
	{"debounceMs negative", func() Command { c := validDebounce(); c.Deliver.DebounceMs = -500; return c }},
	{"debounceMs with mode queue", func() Command { c := validDebounce(); c.Deliver.Mode = ModeQueue; return c }},
	{"debounceMs with mode latest", func() Command { c := validDebounce(); c.Deliver.Mode = ModeLatest; return c }},
	{"debounceMs without a mode", func() Command { c := validDebounce(); c.Deliver.Mode = ""; return c }},
	{"unknown mode", func() Command { c := validDeliver(); c.Deliver.Mode = "later"; return c }},
	{"mode in capitals", func() Command { c := validDeliver(); c.Deliver.Mode = "Debounce"; return c }},
	{"configure with a bad mode", func() Command { c := validConfigure(); c.Configure.DefaultMode = "later"; return c }},
	{"configure without a mode", func() Command {
		c := validConfigure()
		c.Configure = &Configure{}
		return c
	}},
	{"configure debounce without its window", func() Command { c := validConfigure(); c.Configure.DefaultDebounceMs = 0; return c }},
	{"configure debounce window 100", func() Command { c := validConfigure(); c.Configure.DefaultDebounceMs = 100; return c }},
	{"configure debounce window too long", func() Command {
		c := validConfigure()
		c.Configure.DefaultDebounceMs = MaxDebounceMs + 1
		return c
	}},
	{"configure queue with a window", func() Command { c := validConfigure(); c.Configure.DefaultMode = ModeQueue; return c }},
	{"configure with a parentSessionId", func() Command {
		c := validConfigure()
		c.ParentSessionID, c.Handle, c.Depth = "p", "h", 1
		return c
	}},
	{"configure with a handle alone", func() Command { c := validConfigure(); c.Handle = "h"; return c }},
	{"configure without a body", func() Command { c := validConfigure(); c.Configure = nil; return c }},
	{"configure with a delivery body", func() Command { c := validConfigure(); c.Deliver = validDeliver().Deliver; return c }},
	{"configure body on a delivery", func() Command { c := validDeliver(); c.Configure = validConfigure().Configure; return c }},
	{"configure body on a cancel", func() Command { c := validConfigure(); c.Kind = KindCancel; return c }},
}

func TestV5EncodeRejects(t *testing.T) {
	for _, tt := range v5EncodeRejectCases {
		out, err := Encode(Current(), tt.c())
		var we *Error
		if out != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != 5 {
			t.Errorf("%s: %s, err = %v, want ErrInvalid as *Error of v5", tt.name, out, err)
		}
	}
	for name, c := range map[string]Command{
		"debounce":           validDebounce(),
		"debounce shortest":  func() Command { c := validDebounce(); c.Deliver.DebounceMs = MinDebounceMs; return c }(),
		"debounce longest":   func() Command { c := validDebounce(); c.Deliver.DebounceMs = MaxDebounceMs; return c }(),
		"no mode":            func() Command { c := validDeliver(); c.Deliver.Mode = ""; return c }(),
		"configure debounce": validConfigure(),
		"configure latest":   func() Command { c := validConfigure(); c.Configure = &Configure{DefaultMode: ModeLatest}; return c }(),
		"configure queue":    func() Command { c := validConfigure(); c.Configure = &Configure{DefaultMode: ModeQueue}; return c }(),
		"interrupt from a parent": func() Command {
			c := validDeliver()
			c.Deliver.Mode, c.ParentSessionID, c.Handle, c.Depth = ModeInterrupt, "p", "h", 1
			return c
		}(),
		"configure with a caller": func() Command { c := validConfigure(); c.Caller, c.IdempotencyKey = "slack:U42", "k"; return c }(),
		"rollback of two payloads": func() Command {
			c := validDeliver()
			c.Deliver.Mode = ModeRollback
			c.Deliver.Payloads = append(c.Deliver.Payloads, c.Deliver.Payloads[0])
			return c
		}(),
	} {
		b, err := Encode(Current(), c)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := debugCheck(commandCurrent(), b); err != nil {
			t.Errorf("%s: encoded %s fails the schema: %v", name, b, err)
		}
		if back, err := Decode(b); err != nil || !reflect.DeepEqual(back, normalizeCommand(func() Command { c.V = 5; return c }())) {
			t.Errorf("%s: round trip %+v, %v", name, back, err)
		}
	}
}

// v5DecodeRejectCases are version-5 payloads Decode rejects (also part of
// the corpus of TestSchemaAgreement).
var v5DecodeRejectCases = func() []struct{ name, in string } {
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	const payloads = `"payloads":[{"message":"hi"}]`
	deliver := func(body string) string { return `{"v":5,"kind":"deliver",` + env + `,"deliver":{` + body + `}}` }
	configure := func(body string) string { return `{"v":5,"kind":"configure",` + env + `,"configure":` + body + `}` }
	return []struct{ name, in string }{
		{"debounce without debounceMs", deliver(`"mode":"debounce",` + payloads)},
		{"debounceMs 100", deliver(`"mode":"debounce","debounceMs":100,` + payloads)},
		{"debounceMs 0", deliver(`"mode":"debounce","debounceMs":0,` + payloads)},
		{"debounceMs 600001", deliver(`"mode":"debounce","debounceMs":600001,` + payloads)},
		{"debounceMs a fraction", deliver(`"mode":"debounce","debounceMs":500.5,` + payloads)},
		{"debounceMs a string", deliver(`"mode":"debounce","debounceMs":"500",` + payloads)},
		{"debounceMs null", deliver(`"mode":"debounce","debounceMs":null,` + payloads)},
		{"debounceMs with mode queue", deliver(`"mode":"queue","debounceMs":500,` + payloads)},
		{"debounceMs 0 with mode queue", deliver(`"mode":"queue","debounceMs":0,` + payloads)},
		{"debounceMs without a mode", deliver(`"debounceMs":500,` + payloads)},
		{"unknown mode", deliver(`"mode":"later",` + payloads)},
		{"empty mode", deliver(`"mode":"",` + payloads)},
		{"mode null", deliver(`"mode":null,` + payloads)},
		{"mode in capitals", deliver(`"mode":"Debounce","debounceMs":500,` + payloads)},
		{"case-folded debounceMs", deliver(`"mode":"debounce","DebounceMs":500,` + payloads)},
		{"configure with a bad mode", configure(`{"defaultMode":"later"}`)},
		{"configure with an empty mode", configure(`{"defaultMode":""}`)},
		{"configure without a mode", configure(`{}`)},
		{"configure mode null", configure(`{"defaultMode":null}`)},
		{"configure debounce without its window", configure(`{"defaultMode":"debounce"}`)},
		{"configure debounce window 100", configure(`{"defaultMode":"debounce","defaultDebounceMs":100}`)},
		{"configure debounce window 0", configure(`{"defaultMode":"debounce","defaultDebounceMs":0}`)},
		{"configure queue with a window", configure(`{"defaultMode":"queue","defaultDebounceMs":500}`)},
		{"configure unknown member", configure(`{"defaultMode":"queue","mode":"queue"}`)},
		{"configure body null", configure(`null`)},
		{"configure body an array", configure(`[]`)},
		{"configure without a body", `{"v":5,"kind":"configure",` + env + `}`},
		{"configure with a parentSessionId", `{"v":5,"kind":"configure",` + env + `,"parentSessionId":"p","handle":"h","depth":1,"configure":{"defaultMode":"queue"}}`},
		{"configure with a handle alone", `{"v":5,"kind":"configure",` + env + `,"handle":"h","configure":{"defaultMode":"queue"}}`},
		{"configure body on a cancel", `{"v":5,"kind":"cancel",` + env + `,"configure":{"defaultMode":"queue"}}`},
		{"configure with a delivery body", `{"v":5,"kind":"configure",` + env + `,"configure":{"defaultMode":"queue"},"deliver":{` + payloads + `}}`},
		{"v4 configure", `{"v":4,"kind":"configure",` + env + `,"configure":{"defaultMode":"queue"}}`},
		{"v4 configure member", `{"v":4,"kind":"cancel",` + env + `,"configure":{"defaultMode":"queue"}}`},
		{"v4 debounce", `{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":500,` + payloads + `}}`},
		{"v4 debounceMs", `{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","debounceMs":500,` + payloads + `}}`},
		{"v4 latest", `{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"latest",` + payloads + `}}`},
		{"v4 without a mode", `{"v":4,"kind":"deliver",` + env + `,"deliver":{` + payloads + `}}`},
		{"v3 interrupt", `{"v":3,"kind":"deliver",` + env + `,"deliver":{"mode":"interrupt",` + payloads + `}}`},
		{"v2 configure", `{"v":2,"kind":"configure",` + env + `,"configure":{"defaultMode":"queue"}}`},
		{"v1 without a mode", `{"v":1,"kind":"deliver",` + env + `,"deliver":{` + payloads + `}}`},
		{"v0 debounce", `{"type":"deliver","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","mode":"debounce","payloads":[{"message":"x"}]}`},
	}
}()

func TestV5DecodeRejects(t *testing.T) {
	for _, tt := range v5DecodeRejectCases {
		_, err := Decode([]byte(tt.in))
		var we *Error
		if err == nil || !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want a *Error", tt.name, err)
		}
	}
}

// TestDecodeInputV5: the owner's view of a busy-mode delivery carries its
// mode and window, and of a configure command its default; none of the
// window or the default is a member of TurnInput's JSON (never stored,
// nor sent to an agent).
func TestDecodeInputV5(t *testing.T) {
	debounce := DecodeInput(9, readFile(t, "testdata/v5/deliver-debounce.json"))
	if debounce.Kind != KindDeliver || debounce.Mode != ModeDebounce || debounce.DebounceMs != 1500 || debounce.Text != "and also" {
		t.Errorf("debounce: %+v", debounce)
	}
	def := DecodeInput(9, readFile(t, "testdata/v5/deliver-default.json"))
	if def.Mode != "" || def.DebounceMs != 0 {
		t.Errorf("default: %+v", def)
	}
	conf := DecodeInput(9, readFile(t, "testdata/v5/configure.json"))
	want := TurnInput{Seq: 9, ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B1G", Kind: KindConfigure, Caller: "slack:U42", Deployment: "dep-2026-03-01",
		DefaultMode: ModeDebounce, DefaultDebounceMs: 2000}
	if !reflect.DeepEqual(conf, want) {
		t.Errorf("configure:\n got %+v\nwant %+v", conf, want)
	}
	for _, in := range []TurnInput{debounce, conf} {
		b, _ := json.Marshal(in)
		for _, member := range []string{"debounceMs", "defaultMode", "defaultDebounceMs", "1500", "2000"} {
			if bytes.Contains(b, []byte(member)) {
				t.Errorf("%s is a member of TurnInput's JSON: %s", member, b)
			}
		}
	}
}

// The schema's bounds of a debounce window state MinDebounceMs and
// MaxDebounceMs, and its mode enumerations Modes.
func TestDebounceBounds(t *testing.T) {
	type bounds struct {
		Minimum int64    `json:"minimum"`
		Maximum int64    `json:"maximum"`
		Enum    []string `json:"enum"`
	}
	var schema struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(CommandSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	member := func(def, name string) bounds {
		var b bounds
		if err := json.Unmarshal(schema.Defs[def].Properties[name], &b); err != nil {
			t.Fatalf("%s.%s: %v", def, name, err)
		}
		return b
	}
	for def, name := range map[string]string{"Deliver": "debounceMs", "Configure": "defaultDebounceMs"} {
		if b := member(def, name); b.Minimum != MinDebounceMs || b.Maximum != MaxDebounceMs {
			t.Errorf("%s.%s: %+v, want %d..%d", def, name, b, MinDebounceMs, MaxDebounceMs)
		}
	}
	for def, name := range map[string]string{"Deliver": "mode", "Configure": "defaultMode"} {
		if got := member(def, name).Enum; !reflect.DeepEqual(got, Modes()) {
			t.Errorf("%s.%s: enum %v, want %v", def, name, got, Modes())
		}
	}
}
