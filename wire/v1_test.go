package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Version 1 contract: every frozen fixture decodes (lifted to the current
// version), re-encodes through the version-1 encoder to the same bytes,
// which validate against the frozen version-1 schema file, and decodes
// back to the same value.
func TestV1Fixtures(t *testing.T) {
	frozenSchema := frozenValidator(t, 1)
	seen := map[Kind]bool{}
	for _, path := range fixtures(t, 1) {
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
			// Byte-frozen at the version the fixture declares (1), also after
			// a bump, through that version's encoder.
			out, err := Encode(Capability{V: 1}, c)
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
		if !seen[k] && !v2Kinds[string(k)] && !v3Kinds[string(k)] && !v4Kinds[string(k)] && !v5Kinds[string(k)] {
			t.Errorf("no v1 fixture of kind %q", k)
		}
	}
}

func validDeliver() Command {
	return Command{
		Kind: KindDeliver, ID: "c1", AcceptedDeploymentID: "dep-1",
		AcceptedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)),
		Deliver:    &Deliver{Mode: ModeQueue, Payloads: []Payload{{Message: TextMessage("hi")}}},
	}
}

// encodeRejectCases are changes to a valid command that Encode rejects
// (also checked by TestEncodeSchemaAgreement).
var encodeRejectCases = func() []struct {
	name   string
	change func(*Command)
	want   error
} {
	return []struct {
		name   string
		change func(*Command)
		want   error
	}{
		{"unknown kind", func(c *Command) { c.Kind = "dance" }, ErrUnknownKind},
		{"empty id", func(c *Command) { c.ID = "" }, ErrInvalid},
		{"latest", func(c *Command) { c.AcceptedDeploymentID = "LaTeSt" }, ErrInvalid},
		{"bad deployment", func(c *Command) { c.AcceptedDeploymentID = "a.b" }, ErrInvalid},
		{"zero time", func(c *Command) { c.AcceptedAt = time.Time{} }, ErrInvalid},
		{"no body", func(c *Command) { c.Deliver = nil }, ErrInvalid},
		{"two bodies", func(c *Command) { c.Move = &Move{DeploymentID: "d"} }, ErrInvalid},
		{"body on cancel", func(c *Command) { c.Kind = KindCancel }, ErrInvalid},
		{"bad mode", func(c *Command) { c.Deliver.Mode = "later" }, ErrInvalid},
		{"no payloads", func(c *Command) { c.Deliver.Payloads = nil }, ErrInvalid},
		{"empty payload", func(c *Command) { c.Deliver.Payloads = []Payload{{}} }, ErrInvalid},
		{"text and parts", func(c *Command) {
			c.Deliver.Payloads[0].Message = &Message{Text: "a", Parts: []Part{{Type: PartText, Text: "b"}}}
		}, ErrInvalid},
		{"empty parts", func(c *Command) { c.Deliver.Payloads[0].Message = &Message{Parts: []Part{}} }, ErrInvalid},
		{"image without url", func(c *Command) {
			c.Deliver.Payloads[0].Message = &Message{Parts: []Part{{Type: PartImage}}}
		}, ErrInvalid},
		{"outputSchema not object", func(c *Command) { c.Deliver.Payloads[0].OutputSchema = json.RawMessage(`[1]`) }, ErrInvalid},
		{"ext invalid json", func(c *Command) { c.Deliver.Payloads[0].Ext = map[string]json.RawMessage{"a": json.RawMessage(`{`)} }, ErrInvalid},
		{"ext empty key", func(c *Command) { c.Deliver.Payloads[0].Ext = map[string]json.RawMessage{"": json.RawMessage(`1`)} }, ErrInvalid},
		{"too large", func(c *Command) {
			c.Deliver.Payloads[0].Message = TextMessage(strings.Repeat("x", MaxCommandBytes))
		}, ErrTooLarge},
		{"auth result", func(c *Command) {
			c.Kind, c.Deliver, c.AuthCallback = KindAuthCallback, nil, &AuthCallback{AttemptID: "a", Result: "maybe"}
		}, ErrInvalid},
		{"task both", func(c *Command) {
			c.Kind, c.Deliver = KindTaskResult, nil
			c.TaskResult = &TaskResult{TaskID: "t", Result: json.RawMessage(`1`), Error: "e"}
		}, ErrInvalid},
		{"task neither", func(c *Command) {
			c.Kind, c.Deliver, c.TaskResult = KindTaskResult, nil, &TaskResult{TaskID: "t"}
		}, ErrInvalid},
		{"move latest", func(c *Command) { c.Kind, c.Deliver, c.Move = KindMove, nil, &Move{DeploymentID: "latest"} }, ErrInvalid},
		{"timeout zero deadline", func(c *Command) { c.Kind, c.Deliver, c.Timeout = KindTimeout, nil, &Timeout{TimerID: "t"} }, ErrInvalid},
	}
}()

func TestEncodeRejects(t *testing.T) {
	tests := encodeRejectCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validDeliver()
			tt.change(&c)
			_, err := Encode(Current(), c)
			var we *Error
			if !errors.Is(err, tt.want) || !errors.As(err, &we) {
				t.Fatalf("err = %v, want %v as *Error", err, tt.want)
			}
		})
	}
}

func TestEncodeTargets(t *testing.T) {
	for _, v := range []int{0, -1, CurrentVersion + 1} {
		if _, err := Encode(Capability{V: v}, validDeliver()); !errors.Is(err, ErrUnsupportedTarget) {
			t.Errorf("target v%d: err = %v, want ErrUnsupportedTarget", v, err)
		}
	}
}

// Encode normalizes a copy and never mutates the caller's value.
func TestEncodeNormalizesWithoutMutating(t *testing.T) {
	c := validDeliver()
	c.Deliver.Payloads[0].Ext = map[string]json.RawMessage{"k": json.RawMessage(`{ "a" : 1 }`)}
	c.Deliver.Payloads[0].Context = []string{}
	before := c.Deliver.Payloads[0].Ext["k"]
	b, err := Encode(Current(), c)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Deliver.Payloads[0].Ext["k"]) != string(before) || c.AcceptedAt.Location().String() != "x" {
		t.Fatal("Encode mutated its argument")
	}
	want := `{"v":` + strconv.Itoa(CurrentVersion) + `,"kind":"deliver","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-02T02:04:05.000000006Z",` +
		`"deliver":{"mode":"queue","payloads":[{"message":"hi","ext":{"k":{"a":1}}}]}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// decodeRejectCases are payloads Decode rejects (also part of the corpus of
// TestSchemaAgreement).
var decodeRejectCases = func() []struct {
	name string
	in   string
	want error
} {
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	const body = `"deliver":{"mode":"queue","payloads":[{"message":"hi"}]}`
	return []struct {
		name string
		in   string
		want error
	}{
		{"newer version", `{"v":` + strconv.Itoa(CurrentVersion+1) + `,"kind":"deliver",` + env + `,` + body + `}`, ErrUnknownVersion},
		{"far newer version", `{"v":99,"kind":"whatever"}`, ErrUnknownVersion},
		{"v zero", `{"v":0,"kind":"deliver",` + env + `,` + body + `}`, ErrInvalid},
		{"v string", `{"v":"1","kind":"deliver",` + env + `,` + body + `}`, ErrInvalid},
		{"v float", `{"v":1.5,"kind":"cancel",` + env + `}`, ErrInvalid},
		{"v null", `{"v":null,"kind":"cancel",` + env + `}`, ErrInvalid},
		{"unknown kind", `{"v":1,"kind":"dance",` + env + `}`, ErrUnknownKind},
		{"kind not a string", `{"v":1,"kind":5,` + env + `}`, ErrInvalid},
		{"unknown field", `{"v":1,"kind":"cancel","extra":1,` + env + `}`, ErrInvalid},
		{"case-folded field", `{"v":1,"kind":"cancel","ID":"x",` + env + `}`, ErrInvalid},
		{"unknown payload field", `{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":"hi","slack":1}]}}`, ErrInvalid},
		{"null field", `{"v":1,"kind":"cancel","caller":null,` + env + `}`, ErrInvalid},
		{"missing id", `{"v":1,"kind":"cancel","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"}`, ErrInvalid},
		{"latest", `{"v":1,"kind":"cancel","id":"c","acceptedDeploymentId":"latest","acceptedAt":"2026-01-01T00:00:00Z"}`, ErrInvalid},
		{"zero time", `{"v":1,"kind":"cancel","id":"c","acceptedDeploymentId":"d","acceptedAt":"0001-01-01T00:00:00Z"}`, ErrInvalid},
		{"bad time", `{"v":1,"kind":"cancel","id":"c","acceptedDeploymentId":"d","acceptedAt":"yesterday"}`, ErrInvalid},
		{"deliver without body", `{"v":1,"kind":"deliver",` + env + `}`, ErrInvalid},
		{"cancel with body", `{"v":1,"kind":"cancel",` + env + `,` + body + `}`, ErrInvalid},
		{"task both", `{"v":1,"kind":"task.result",` + env + `,"taskResult":{"taskId":"t","result":1,"error":"e"}}`, ErrInvalid},
		{"message number", `{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":3}]}}`, ErrInvalid},
		{"trailing data", `{"v":1,"kind":"cancel",` + env + `} {}`, ErrInvalid},
		{"not an object", `[1,2]`, ErrInvalid},
		{"not json", `deliver hello`, ErrInvalid},
		{"invalid utf-8", "{\"v\":1,\"kind\":\"cancel\",\"caller\":\"\xff\"," + env + "}", ErrInvalid},
		{"too large", `{"x":"` + strings.Repeat("a", MaxCommandBytes) + `"}`, ErrTooLarge},
	}
}()

func TestDecodeRejects(t *testing.T) {
	tests := decodeRejectCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			var we *Error
			if !errors.Is(err, tt.want) || !errors.As(err, &we) {
				t.Fatalf("err = %v, want %v as *Error", err, tt.want)
			}
		})
	}
}

// The typed error carries what was readable.
func TestDecodeErrorFields(t *testing.T) {
	_, err := Decode([]byte(`{"v":7,"kind":"deliver","id":"c-9"}`))
	var we *Error
	if !errors.As(err, &we) || we.Version != 7 || we.Kind != "deliver" || we.CommandID != "c-9" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.HasPrefix(err.Error(), "wire: unknown version") {
		t.Fatalf("message %q", err)
	}
}

// Ext is the open extension point: anything JSON goes there.
func TestExtAcceptsAnyJSON(t *testing.T) {
	in := `{"v":` + strconv.Itoa(CurrentVersion) + `,"kind":"deliver","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z",` +
		`"deliver":{"mode":"queue","payloads":[{"ext":{"a":null,"b":[1,{"c":"<&>"}],"d":12345678901234567890}}]}}`
	c, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Encode(Current(), c)
	if err != nil || string(out) != in {
		t.Fatalf("%v\n got %s\nwant %s", err, out, in)
	}
}

func TestCommandHelpers(t *testing.T) {
	c := validDeliver()
	c.Deliver.Payloads = append(c.Deliver.Payloads, Payload{Message: &Message{Parts: []Part{
		{Type: PartText, Text: "one"}, {Type: PartImage, URL: "u"}, {Type: PartText, Text: "two"},
	}}}, Payload{Context: []string{"ctx"}})
	if got := c.Text(); got != "hi\none\ntwo" {
		t.Errorf("Text() = %q", got)
	}
	if !c.Conversational() || c.Steer() {
		t.Error("queue deliver: want conversational, not steer")
	}
	c.Deliver.Mode = ModeSteer
	if !c.Steer() {
		t.Error("steer deliver: want Steer()")
	}
	other := Command{Kind: KindInputResponse}
	if other.Conversational() || other.Text() != "" {
		t.Error("input.response is not conversational and has no text")
	}
}
