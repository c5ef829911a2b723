package docs_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/docs"
	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The component schemas of docs/openapi.yaml held to the server: request
// bodies the ingress's parsers accept are valid and the ones they refuse
// for their shape are not; answers marshalled from the real Go types are
// valid, and every member they carry is declared.

// requestSchemas and responseSchemas are the component schemas the NATS
// micro endpoints publish (ingress/microschema.go).
var (
	requestSchemas = []string{"CreateRequest", "DeliveryRequest", "NatsControlRequest", "NatsInputRequest",
		"NatsAuthorizeRequest", "NatsTagRequest", "NatsEndRequest", "NatsDeleteRequest", "NatsStatusRequest",
		"NatsCommandRequest", "NatsEventsRequest", "NatsBlobRequest", "ListRequest"}
	responseSchemas = []string{"Error", "Created", "Receipt", "DeleteResult", "Status", "CommandOutcome",
		"EventPage", "Event", "BlobChunk", "SessionList"}
)

// compile compiles component name, dereferenced by docs.Schema, as one
// JSON Schema resource; closed adds "additionalProperties": false to
// every object schema that lists properties and says nothing of others
// (to catch an answer member the schema does not declare).
func compile(t *testing.T, name string, closed bool) *jsonschema.Schema {
	t.Helper()
	raw, err := docs.Schema(name)
	if err != nil {
		t.Fatalf("docs.Schema(%s): %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	if closed {
		doc = closeObjects(doc)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "byte", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := base64.StdEncoding.DecodeString(s)
		return err
	}})
	url := "mem:///" + name + ".json"
	if closed {
		url = "mem:///closed/" + name + ".json"
	}
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("schema %s does not compile: %v", name, err)
	}
	return sch
}

// closeObjects is doc with every open object schema that lists properties closed.
func closeObjects(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v)+1)
		for k, x := range v {
			out[k] = closeObjects(x)
		}
		if _, ok := v["properties"]; ok {
			if _, set := v["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = closeObjects(x)
		}
		return out
	}
	return v
}

// schemaDoc is component name dereferenced, as a generic value.
func schemaDoc(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := docs.Schema(name)
	if err != nil {
		t.Fatalf("docs.Schema(%s): %v", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	return m
}

func valid(t *testing.T, sch *jsonschema.Schema, b []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("test body %s is not JSON: %v", b, err)
	}
	return sch.Validate(doc)
}

func TestSchemasExistAndCompile(t *testing.T) {
	names, err := docs.Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(slices.Clone(requestSchemas), responseSchemas...) {
		if !slices.Contains(names, want) {
			t.Errorf("docs/openapi.yaml has no component schema %s", want)
		}
	}
	for _, name := range names {
		raw, err := docs.Schema(name)
		if err != nil {
			t.Errorf("docs.Schema(%s): %v", name, err)
			continue
		}
		if bytes.Contains(raw, []byte(`"$ref"`)) {
			t.Errorf("docs.Schema(%s) still holds a $ref: %s", name, raw)
		}
		compile(t, name, false)
	}
	if _, err := docs.Schema("NoSuchSchema"); !errors.Is(err, docs.ErrNoSchema) {
		t.Errorf("docs.Schema of an unknown name: %v, want docs.ErrNoSchema", err)
	}
}

// TestSchemasPlainJSONSchema: only keywords that mean the same in OpenAPI
// 3.0.3 and in JSON Schema (draft 4 to 2020-12), and no OpenAPI-only ones.
func TestSchemasPlainJSONSchema(t *testing.T) {
	allowed := []string{"type", "properties", "required", "additionalProperties", "enum", "pattern",
		"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties",
		"maxProperties", "format", "items", "oneOf", "anyOf", "allOf", "not", "description"}
	names, err := docs.Names()
	if err != nil {
		t.Fatal(err)
	}
	var walk func(name, at string, v any, keywords bool)
	walk = func(name, at string, v any, keywords bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch {
				case !keywords: // property names
					walk(name, at+"/"+k, x, true)
				case !slices.Contains(allowed, k):
					t.Errorf("%s%s: keyword %q", name, at, k)
				case k == "properties":
					walk(name, at+"/"+k, x, false)
				case k == "enum" || k == "required" || k == "type" || k == "pattern" || k == "format" || k == "description":
				default:
					walk(name, at+"/"+k, x, true)
				}
				if k == "type" && keywords {
					if _, ok := x.(string); !ok {
						t.Errorf("%s%s: type must be one string (OpenAPI 3.0)", name, at)
					}
				}
			}
		case []any:
			for i, x := range v {
				walk(name, fmt.Sprintf("%s/%d", at, i), x, true)
			}
		case bool: // only additionalProperties may be a boolean (walked as a schema)
			if !strings.HasSuffix(at, "/additionalProperties") {
				t.Errorf("%s%s: a boolean schema (not in OpenAPI 3.0)", name, at)
			}
		}
	}
	for _, name := range names {
		walk(name, "", schemaDoc(t, name), true)
	}
}

// ---- requests ----

var lim = ingress.Limits{}

// encode encodes the command a parsed request carries, as the ingress
// does before anything is looked up (Server.prepare, Request.command):
// an invalid command is refused there (400).
func encode(r ingress.Request) error {
	base := wire.Command{V: wire.CurrentVersion, ID: "01M8NKQJZYRW2T8C5VQ4H7D3KA", AcceptedDeploymentID: "v1",
		AcceptedAt: time.Now(), Caller: r.Caller, IdempotencyKey: r.IdempotencyKey}
	var cmds []wire.Command
	if r.Configure != nil && r.Kind != wire.KindConfigure { // a create's default mode, ahead of its first message
		c := base
		c.Kind, c.Configure = wire.KindConfigure, r.Configure
		cmds = append(cmds, c)
	}
	if r.Kind != "" {
		c := base
		c.Kind, c.InputResponse, c.AuthCallback, c.Tag = r.Kind, r.Input, r.Auth, r.Tag
		switch r.Kind {
		case wire.KindDeliver:
			c.Deliver = &wire.Deliver{Mode: r.Mode, DebounceMs: r.DebounceMs, Payloads: r.Payloads}
		case wire.KindConfigure:
			c.Configure = r.Configure
		case wire.KindTerminate:
			if r.EndMessage != "" {
				c.Terminate = &wire.Terminate{Message: r.EndMessage}
			}
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if _, err := wire.Encode(wire.Capability{V: wire.CurrentVersion}, c); err != nil {
			return err
		}
	}
	return nil
}

func cmd(parse func([]byte) (ingress.Request, error)) func([]byte) error {
	return func(b []byte) error {
		r, err := parse(b)
		if err != nil {
			return err
		}
		return encode(r)
	}
}

func only[T any](parse func([]byte) (T, error)) func([]byte) error {
	return func(b []byte) error { _, err := parse(b); return err }
}

// accepts is, per request schema, whether the server accepts a body: its
// parser, and for a command the encoding.
var accepts = map[string]func([]byte) error{
	"CreateRequest":   cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseCreate(b, lim) }),
	"DeliveryRequest": cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseDelivery(b, lim) }),
	"NatsControlRequest": func(b []byte) error {
		var errs []error
		for _, k := range []wire.Kind{wire.KindCancel, wire.KindReset, wire.KindClear, wire.KindCompact} {
			errs = append(errs, cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseControl(b, k, "", lim) })(b))
		}
		for _, err := range errs[1:] {
			if (err == nil) != (errs[0] == nil) {
				return fmt.Errorf("the control kinds disagree: %v", errs)
			}
		}
		return errs[0]
	},
	"NatsInputRequest":     cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseInput(b, "", lim) }),
	"NatsAuthorizeRequest": cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseAuthorize(b, "", lim) }),
	"NatsTagRequest":       cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseTag(b, "", lim) }),
	"NatsEndRequest":       cmd(func(b []byte) (ingress.Request, error) { return ingress.ParseEnd(b, "", lim) }),
	"NatsDeleteRequest":    only(ingress.ParseDelete),
	"NatsStatusRequest":    only(ingress.ParseStatusRequest),
	"NatsCommandRequest":   only(ingress.ParseCommandRequest),
	"NatsEventsRequest":    only(ingress.ParseEventsRequest),
	"NatsBlobRequest":      only(ingress.ParseBlobRequest),
	"ListRequest":          only(ingress.ParseListRequest),
}

const (
	sid    = "01M8NKQJZXBWH9DN2M12M9ERC3"
	digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// j builds a JSON body from a format: $S is the session ID.
func j(s string, args ...any) []byte {
	return []byte(strings.ReplaceAll(fmt.Sprintf(s, args...), "$S", `"`+sid+`"`))
}

// tagsN is an object of n tags, each of the JSON value.
func tagsN(n int, value string) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"k%d":%s`, i, value))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func payloadsN(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`{"message":"x"},`, n), ",") + "]"
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// accepted are bodies the server accepts, per request schema.
var accepted = map[string][][]byte{
	"CreateRequest": {
		j(`{}`),
		j(`{"alias":"C123.456","text":"hello"}`),
		j(`{"alias":"<id@example.com> ü","payloads":[{"message":[{"type":"text","text":"look"},{"type":"image","url":"https://example.com/a.png","mediaType":"image/png","name":"a.png"}],"ext":{"slack":{"ts":"123.456"}}}],"timeout":"24h","caller":"U1","tags":{"tenant":"acme","user":""},"defaultMode":"debounce","defaultDebounce":"2s"}`),
		j(`{"defaultMode":"reject"}`),
		j(`{"tags":{}}`),
		j(`{"tags":%s}`, tagsN(16, `"v"`)),
		j(`{"text":"x","timeout":"+1h30m"}`),
		j(`{"payloads":[{"context":["a","b"],"inputResponses":[{"requestId":"r1","value":{"x":1}}],"outputSchema":{"type":"object"}}]}`),
		j(`{"payloads":[{"message":""},{"message":[{"type":"file","url":"u","text":""}]},{"message":[{"type":"text","text":"t","url":""}]}]}`),
		j(`{"payloads":%s}`, payloadsN(64)),
		j(`{"alias":"%s"}`, repeat("a", 512)),
		j(`{"caller":"%s"}`, repeat("c", 256)),
	},
	"DeliveryRequest": {
		j(`{"alias":"C123.456","text":"second"}`),
		j(`{"sessionId":$S,"text":"and this too","mode":"steer"}`),
		j(`{"alias":"C123.456","mode":"steer","payloads":[{"message":[{"type":"text","text":"look"},{"type":"image","url":"https://example.com/a.png"}],"ext":{"slack":{"ts":"123.456"}}}]}`),
		j(`{"alias":"C123.456","text":"hi","mode":"debounce","debounce":"3s"}`),
		j(`{"alias":"C123.456","text":"hi","mode":"debounce","debounce":"250ms"}`),
		j(`{"alias":"thread-2","text":"hi","idempotencyKey":"msg-1","caller":"U1","timeout":"30m","tags":{"tenant":"acme"}}`),
		j(`{"sessionId":$S,"payloads":[{"inputResponses":[{"requestId":"r","value":null}]}],"mode":"latest"}`),
		j(`{"sessionId":$S,"payloads":[{"ext":{"a":null}},{"outputSchema":{}}],"mode":"queue"}`),
		j(`{"sessionId":$S,"payloads":[{"inputResponses":[{"requestId":"r"}]},{"message":"x","context":[],"ext":{}}]}`),
		j(`{"sessionId":$S,"text":"x","mode":"interrupt"}`),
		j(`{"sessionId":$S,"text":"x","mode":"rollback"}`),
		j(`{"sessionId":$S,"text":"x","mode":"reject"}`),
	},
	"NatsControlRequest": {
		j(`{"sessionId":$S}`),
		j(`{"sessionId":$S,"caller":"ops","idempotencyKey":"k1"}`),
	},
	"NatsInputRequest": {
		j(`{"sessionId":$S,"requestId":"t3-1-input","value":"green"}`),
		j(`{"sessionId":$S,"requestId":"r","value":{"a":[1,2]},"caller":"U1","idempotencyKey":"k"}`),
		j(`{"sessionId":$S,"requestId":"r","value":false}`),
		j(`{"sessionId":$S,"requestId":"r","value":0}`),
		j(`{"sessionId":$S,"requestId":"r","value":[]}`),
		j(`{"sessionId":$S,"requestId":"%s","value":""}`, repeat("r", 128)),
	},
	"NatsAuthorizeRequest": {
		j(`{"sessionId":$S,"attemptId":"t4-1-auth","result":"granted","data":{"token":"abc"}}`),
		j(`{"sessionId":$S,"attemptId":"t4-1-auth","result":"denied"}`),
		j(`{"sessionId":$S,"attemptId":"a","result":"granted","data":"x","caller":"c","idempotencyKey":"k"}`),
		j(`{"sessionId":$S,"attemptId":"a","result":"granted","data":[1]}`),
	},
	"NatsTagRequest": {
		j(`{"sessionId":$S,"tags":{"user":null,"tier":"gold"}}`),
		j(`{"sessionId":$S,"tags":{"a":""},"caller":"c","idempotencyKey":"k"}`),
		j(`{"sessionId":$S,"tags":%s}`, tagsN(16, "null")),
		j(`{"sessionId":$S,"defaultMode":"reject"}`),
		j(`{"sessionId":$S,"defaultMode":"queue","idempotencyKey":"k"}`),
		j(`{"sessionId":$S,"defaultMode":"debounce","defaultDebounce":"10m","caller":"c"}`),
	},
	"NatsEndRequest": {
		j(`{"sessionId":$S}`),
		j(`{"sessionId":$S,"message":"thanks, all done","caller":"c","idempotencyKey":"k"}`),
		j(`{"sessionId":$S,"message":"%s"}`, repeat("m", 256)),
	},
	"NatsDeleteRequest": {
		j(`{"sessionId":$S}`),
		j(`{"sessionId":$S,"force":true}`),
		j(`{"sessionId":$S,"force":false}`),
	},
	"NatsStatusRequest": {
		j(`{"sessionId":$S}`),
		j(`{"alias":"C123.456"}`),
	},
	"NatsCommandRequest": {
		j(`{"sessionId":$S,"seq":2}`),
		j(`{"sessionId":$S,"seq":18446744073709551615}`),
	},
	"NatsEventsRequest": {
		j(`{"sessionId":$S}`),
		j(`{"alias":"C123.456","after":10,"limit":500,"wait":"30s"}`),
		j(`{"sessionId":$S,"after":0,"limit":1,"wait":"0"}`),
		j(`{"sessionId":$S,"wait":"1.5s"}`),
		j(`{"sessionId":$S,"wait":"-0s"}`),
		j(`{"sessionId":$S,"wait":"500ms"}`),
	},
	"NatsBlobRequest": {
		j(`{"sessionId":$S,"digest":"%s"}`, digest),
		j(`{"sessionId":$S,"digest":"%s","offset":393216}`, digest),
	},
	"ListRequest": {
		j(`{}`),
		j(`{"agent":"default","deployment":"v1","state":"active","tags":{"tenant":"acme"},"waiting":"input","parent":$S,"limit":200,"cursor":"MXxh"}`),
		j(`{"limit":0,"agent":"","state":"","waiting":"any"}`),
		j(`{"state":"quarantined","limit":1}`),
	},
}

// refused are bodies the server refuses for their shape, per request
// schema: each must be invalid.
var refused = map[string][][]byte{
	"CreateRequest": {
		j(`[]`),
		j(`"hello"`),
		j(`{"sessionId":$S}`),
		j(`{"text":"x","mode":"steer"}`),
		j(`{"text":"x","idempotencyKey":"k"}`),
		j(`{"text":""}`),
		j(`{"text":5}`),
		j(`{"text":"a","payloads":[{"message":"b"}]}`),
		j(`{"alias":null}`),
		j(`{"alias":""}`),
		j(`{"alias":"%s"}`, repeat("a", 513)),
		j(`{"payloads":[]}`),
		j(`{"payloads":{}}`),
		j(`{"payloads":[{}]}`),
		j(`{"payloads":%s}`, payloadsN(65)),
		j(`{"payloads":[{"message":"x","extra":1}]}`),
		j(`{"payloads":[{"message":5}]}`),
		j(`{"payloads":[{"message":[]}]}`),
		j(`{"payloads":[{"message":null}]}`),
		j(`{"payloads":[{"message":[{"type":"image"}]}]}`),
		j(`{"payloads":[{"message":[{"type":"text","text":"a","url":"u"}]}]}`),
		j(`{"payloads":[{"message":[{"type":"video","url":"u"}]}]}`),
		j(`{"payloads":[{"message":[{"type":"text","text":"a","alt":"b"}]}]}`),
		j(`{"defaultMode":"debounce"}`),
		j(`{"defaultDebounce":"2s"}`),
		j(`{"defaultMode":"queue","defaultDebounce":"2s"}`),
		j(`{"defaultMode":"fast"}`),
		j(`{"timeout":"soon"}`),
		j(`{"timeout":"-1h"}`),
		j(`{"timeout":"0"}`),
		j(`{"timeout":30}`),
		j(`{"tags":{"a":null}}`),
		j(`{"tags":"acme"}`),
		j(`{"tags":{"a":1}}`),
		j(`{"tags":%s}`, tagsN(17, `"v"`)),
		j(`{"tags":{"tenant":"%s"}}`, repeat("v", 257)),
		j(`{"caller":""}`),
		j(`{"caller":"%s"}`, repeat("c", 257)),
		j(`{"text":"x","parentSessionId":$S}`),
	},
	"DeliveryRequest": {
		j(`{"text":"x"}`),
		j(`{"sessionId":$S,"alias":"a","text":"x"}`),
		j(`{"alias":"a"}`),
		j(`{"alias":"a","text":"x","payloads":[{"message":"y"}]}`),
		j(`{"alias":"a","text":"x","mode":"debounce"}`),
		j(`{"alias":"a","text":"x","debounce":"3s"}`),
		j(`{"alias":"a","text":"x","mode":"queue","debounce":"3s"}`),
		j(`{"alias":"a","text":"x","mode":"later"}`),
		j(`{"alias":"a","text":"x","mode":"debounce","debounce":5}`),
		j(`{"alias":"a","text":"x","mode":"debounce","debounce":"3 s"}`),
		j(`{"sessionId":"bad id","text":"x"}`),
		j(`{"sessionId":"%s","text":"x"}`, repeat("s", 129)),
		j(`{"sessionId":5,"text":"x"}`),
		j(`{"alias":"a","text":"x","acceptedDeploymentId":"v9"}`),
		j(`{"alias":"a","text":"x","handle":"h"}`),
		j(`{"alias":"a","text":"x","defaultMode":"queue"}`),
		j(`{"alias":"a","text":"x","idempotencyKey":""}`),
		j(`{"alias":"a","text":"x","idempotencyKey":"%s"}`, repeat("k", 257)),
		j(`{"alias":"a","text":"x","caller":null}`),
		j(`{"alias":"a","payloads":[{"message":"x","context":"c"}]}`),
		j(`{"alias":"a","payloads":[{"message":"x","context":[1]}]}`),
		j(`{"alias":"a","payloads":[{"outputSchema":[1]}]}`),
		j(`{"alias":"a","payloads":[{"outputSchema":"s"}]}`),
		j(`{"alias":"a","payloads":[{"inputResponses":[{"value":1}]}]}`),
		j(`{"alias":"a","payloads":[{"inputResponses":[{"requestId":"r","value":1,"x":2}]}]}`),
		j(`{"alias":"a","payloads":[{"inputResponses":[{"requestId":"%s","value":1}]}]}`, repeat("r", 129)),
		j(`{"alias":"a","payloads":[{"ext":[]}]}`),
		j(`{"alias":"a","payloads":[{"ext":{}}]}`),
		j(`{"alias":"a","payloads":[{"context":[]}]}`),
		j(`{"alias":"a","payloads":[{"inputResponses":[]},{"message":"x"}]}`),
		j(`{"alias":"a","payloads":[{"ext":null}]}`),
		j(`{"alias":"a","text":"x","tags":{"a":null}}`),
		j(`{"alias":"a","text":"x","timeout":"never"}`),
	},
	"NatsControlRequest": {
		j(`{}`),
		j(`{"caller":"ops"}`),
		j(`{"sessionId":$S,"text":"x"}`),
		j(`{"sessionId":5}`),
		j(`{"sessionId":"a.b"}`),
		j(`{"sessionId":$S,"caller":null}`),
		j(`{"sessionId":$S,"caller":""}`),
		j(`{"sessionId":$S,"idempotencyKey":7}`),
		j(`{"sessionId":$S,"depth":1}`),
	},
	"NatsInputRequest": {
		j(`{"sessionId":$S,"requestId":"r","value":null}`),
		j(`{"sessionId":$S,"requestId":"r"}`),
		j(`{"sessionId":$S,"value":"green"}`),
		j(`{"sessionId":$S,"requestId":"","value":"green"}`),
		j(`{"sessionId":$S,"requestId":5,"value":"green"}`),
		j(`{"sessionId":$S,"requestId":"%s","value":"green"}`, repeat("r", 129)),
		j(`{"sessionId":$S,"requestId":"r","value":1,"extra":1}`),
		j(`{"requestId":"r","value":1}`),
	},
	"NatsAuthorizeRequest": {
		j(`{"sessionId":$S,"attemptId":"a","result":"maybe"}`),
		j(`{"sessionId":$S,"attemptId":"a"}`),
		j(`{"sessionId":$S,"result":"granted"}`),
		j(`{"sessionId":$S,"attemptId":"","result":"granted"}`),
		j(`{"sessionId":$S,"attemptId":"a","result":"granted","data":null}`),
		j(`{"sessionId":$S,"attemptId":"a","result":true}`),
		j(`{"sessionId":$S,"attemptId":"%s","result":"denied"}`, repeat("a", 129)),
		j(`{"sessionId":$S,"attemptId":"a","result":"granted","value":1}`),
	},
	"NatsTagRequest": {
		j(`{"sessionId":$S}`),
		j(`{"tags":{"a":"b"}}`),
		j(`{"sessionId":$S,"tags":{}}`),
		j(`{"sessionId":$S,"tags":[]}`),
		j(`{"sessionId":$S,"tags":"a"}`),
		j(`{"sessionId":$S,"tags":{"a":1}}`),
		j(`{"sessionId":$S,"tags":%s}`, tagsN(17, `"v"`)),
		j(`{"sessionId":$S,"tags":%s}`, tagsN(17, "null")),
		j(`{"sessionId":$S,"tags":{"a":"%s"}}`, repeat("v", 257)),
		j(`{"sessionId":$S,"tags":{"a":"b"},"defaultMode":"queue"}`),
		j(`{"sessionId":$S,"tags":{"a":"b"},"defaultDebounce":"2s"}`),
		j(`{"sessionId":$S,"defaultDebounce":"2s"}`),
		j(`{"sessionId":$S,"defaultMode":"debounce"}`),
		j(`{"sessionId":$S,"defaultMode":"steer","defaultDebounce":"2s"}`),
		j(`{"sessionId":$S,"defaultMode":"slow"}`),
		j(`{"sessionId":$S,"tags":{"a":"b"},"text":"x"}`),
	},
	"NatsEndRequest": {
		j(`{}`),
		j(`{"message":"bye"}`),
		j(`{"sessionId":$S,"message":""}`),
		j(`{"sessionId":$S,"message":5}`),
		j(`{"sessionId":$S,"message":null}`),
		j(`{"sessionId":$S,"message":"%s"}`, repeat("m", 257)),
		j(`{"sessionId":$S,"reason":"done"}`),
	},
	"NatsDeleteRequest": {
		j(`{}`),
		j(`{"force":true}`),
		j(`{"sessionId":$S,"force":"yes"}`),
		j(`{"sessionId":$S,"purge":true}`),
		j(`{"sessionId":"bad id"}`),
		j(`{"sessionId":5}`),
		j(`[]`),
		j(`{"sessionId":$S,"force":null}`),
		j(`{"SESSIONID":$S}`),
	},
	"NatsStatusRequest": {
		j(`{"sessionId":$S,"alias":"a"}`),
		j(`{}`),
		j(`{"sessionId":$S,"x":1}`),
		j(`{"alias":""}`),
		j(`{"sessionId":null}`),
		j(`{"sessionId":"bad id"}`),
		j(`{"alias":5}`),
	},
	"NatsCommandRequest": {
		j(`{"sessionId":$S}`),
		j(`{"seq":2}`),
		j(`{"sessionId":$S,"seq":0}`),
		j(`{"sessionId":$S,"seq":-1}`),
		j(`{"sessionId":$S,"seq":"2"}`),
		j(`{"sessionId":$S,"seq":1.5}`),
		j(`{"sessionId":$S,"seq":null}`),
		j(`{"sessionId":$S,"seq":2,"x":1}`),
		j(`{"sessionId":"bad id","seq":2}`),
		j(`{"SessionId":$S,"Seq":3}`),
	},
	"NatsEventsRequest": {
		j(`{}`),
		j(`{"sessionId":$S,"alias":"a"}`),
		j(`{"sessionId":$S,"limit":0}`),
		j(`{"sessionId":$S,"limit":501}`),
		j(`{"sessionId":$S,"limit":"5"}`),
		j(`{"sessionId":$S,"after":-1}`),
		j(`{"sessionId":$S,"after":"1"}`),
		j(`{"sessionId":$S,"wait":"-1s"}`),
		j(`{"sessionId":$S,"wait":"soon"}`),
		j(`{"sessionId":$S,"wait":5}`),
		j(`{"sessionId":$S,"wait":null}`),
		j(`{"sessionId":$S,"follow":true}`),
		j(`{"alias":""}`),
	},
	"NatsBlobRequest": {
		j(`{"sessionId":$S}`),
		j(`{"digest":"%s"}`, digest),
		j(`{"sessionId":$S,"digest":"%s"}`, strings.ToUpper(digest)),
		j(`{"sessionId":$S,"digest":"sha256:abc"}`),
		j(`{"sessionId":$S,"digest":"%s","offset":-1}`, digest),
		j(`{"sessionId":$S,"digest":"%s","offset":"0"}`, digest),
		j(`{"sessionId":$S,"digest":"%s","size":1}`, digest),
	},
	"ListRequest": {
		j(`{"limit":201}`),
		j(`{"limit":-1}`),
		j(`{"limit":"5"}`),
		j(`{"state":"sleeping"}`),
		j(`{"waiting":"paused"}`),
		j(`{"tag":"a:b"}`),
		j(`{"agent":"Default"}`),
		j(`{"deployment":"latest"}`),
		j(`{"deployment":"LATEST"}`),
		j(`{"deployment":"v.1"}`),
		j(`{"parent":"bad id"}`),
		j(`{"cursor":null}`),
		j(`{"tags":{"a":"%s"}}`, repeat("v", 257)),
		j(`{"tags":{"a":1}}`),
		j(`[]`),
	},
}

// beyond are bodies the server refuses by a rule the schema cannot state
// (bytes rather than characters, a duration's range, the form of a tag
// key, a decimal integer's spelling): the schema accepts them, and its
// descriptions say the rule. The list keeps the limits honest: a rule the
// schema comes to state moves to refused.
var beyond = map[string][][]byte{
	"CreateRequest": {
		j(`{"timeout":"0s"}`),
		j(`{"caller":"%s"}`, repeat("é", 129)),
		j(`{"alias":"%s"}`, repeat("é", 86)),
		j(`{"tags":{"Tenant":"acme"}}`),
		j(`{"defaultMode":"debounce","defaultDebounce":"100ms"}`),
		j(`{"payloads":[{"ext":{"":{}}}]}`),
	},
	"DeliveryRequest": {
		j(`{"alias":"a","text":"x","mode":"debounce","debounce":"11m"}`),
		j(`{"alias":"a","text":"x","tags":{"a b":"c"}}`),
	},
	"NatsTagRequest": {
		j(`{"sessionId":$S,"tags":{"A":null}}`),
	},
	"NatsEndRequest": {
		j(`{"sessionId":$S,"message":"%s"}`, repeat("é", 129)),
	},
	"NatsCommandRequest": {
		j(`{"sessionId":$S,"seq":2.0}`),
		j(`{"sessionId":$S,"seq":1e3}`),
	},
	"NatsEventsRequest": {
		j(`{"sessionId":$S,"wait":"31s"}`),
		j(`{"sessionId":$S,"after":1.0}`),
	},
	"ListRequest": {
		j(`{"tags":{"Tenant":"acme"}}`),
	},
}

// lenient are bodies the server accepts that the schema refuses: the
// published contract is the strict one (docs/api.md, "Strict bodies"),
// and these are leniencies of a parser (the delete's and the command
// lookup's plain decoders; encoding/json's nulls inside arrays and maps).
// A client must not rely on them; the list tells when one is fixed.
var lenient = map[string][][]byte{
	"DeliveryRequest": {
		j(`{"alias":"a","payloads":[{"message":"x","context":[null]}]}`),
	},
	"ListRequest": {
		j(`{"tags":{"a":null}}`),
	},
}

func TestRequestSchemas(t *testing.T) {
	for _, name := range requestSchemas {
		t.Run(name, func(t *testing.T) {
			sch := compile(t, name, false)
			accept := accepts[name]
			if len(accepted[name]) < 2 || len(refused[name]) < 3 {
				t.Fatalf("too few examples of %s", name)
			}
			for _, b := range accepted[name] {
				if err := accept(b); err != nil {
					t.Errorf("the server refuses an accepted example %s: %v", b, err)
				}
				if err := valid(t, sch, b); err != nil {
					t.Errorf("%s refuses %s, which the server accepts: %v", name, b, err)
				}
			}
			for _, b := range refused[name] {
				if err := accept(b); err == nil {
					t.Errorf("the server accepts a refused example %s", b)
				}
				if err := valid(t, sch, b); err == nil {
					t.Errorf("%s accepts %s, which the server refuses", name, b)
				}
			}
			for _, b := range lenient[name] {
				if err := accept(b); err != nil {
					t.Errorf("the server now refuses %s (listed as a leniency): drop it from the list (%v)", b, err)
				}
				if err := valid(t, sch, b); err == nil {
					t.Errorf("%s accepts %s, a leniency of the server's", name, b)
				}
			}
			for _, b := range beyond[name] {
				if err := accept(b); err == nil {
					t.Errorf("the server accepts %s (listed as refused beyond the schema)", b)
				}
				if err := valid(t, sch, b); err != nil {
					t.Errorf("%s now refuses %s: move it to the refused examples (%v)", name, b, err)
				}
			}
		})
	}
}

var allowedRE = regexp.MustCompile(`\(allowed: ([^)]*)\)`)

// members are the member names of a request schema (of every branch of a
// oneOf of objects).
func members(t *testing.T, name string) []string {
	s := schemaDoc(t, name)
	var out []string
	for _, branch := range append([]any{s}, anySlice(s["oneOf"])...) {
		props, _ := branch.(map[string]any)["properties"].(map[string]any)
		for k := range props {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

// jsonMembers are the JSON member names of a struct type, and which of
// them are always marshalled.
func jsonMembers(typ reflect.Type) (all, always []string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

// TestRequestMembers: each request schema names exactly the members its
// parser allows (its refusal of an unknown member lists them; the two
// decoders that do not list them decode into a struct).
func TestRequestMembers(t *testing.T) {
	listed := map[string][]string{}
	for _, name := range requestSchemas {
		err := accepts[name]([]byte(`{"zz-unknown":1}`))
		m := allowedRE.FindStringSubmatch(fmt.Sprint(err))
		if m == nil {
			continue
		}
		listed[name] = strings.Split(m[1], ", ")
	}
	listed["NatsDeleteRequest"], _ = jsonMembers(reflect.TypeFor[ingress.DeleteRequest]())
	listed["NatsCommandRequest"], _ = jsonMembers(reflect.TypeFor[ingress.CommandRequest]())
	for _, name := range requestSchemas {
		want, ok := listed[name]
		if !ok {
			t.Errorf("%s: the parser does not tell its members", name)
			continue
		}
		want = slices.Sorted(slices.Values(want))
		if got := members(t, name); !slices.Equal(got, want) {
			t.Errorf("%s names members %v; the parser allows %v", name, got, want)
		}
		if ap, ok := schemaDoc(t, name)["additionalProperties"]; ok && ap != false || !ok && name != "NatsStatusRequest" {
			t.Errorf("%s is not closed (additionalProperties: false)", name)
		}
	}
}

// ---- responses ----

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func event(t *testing.T, seq uint64, kind string, data any) json.RawMessage {
	t.Helper()
	e, err := wire.NewEvent(kind, data)
	if err != nil {
		t.Fatal(err)
	}
	e.SessionID, e.Seq, e.Time, e.OwnerRunID, e.DeploymentID = sid, seq, time.Now(), "01M8NKQJZXBWH9DN2M14YDVAMD", "v1"
	b, err := wire.EncodeEvent(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func responses(t *testing.T) map[string][][]byte {
	now := time.Date(2026, 12, 6, 1, 43, 19, 564000000, time.UTC)
	until := now.Add(3 * time.Second)
	usage := wire.Usage{InputTokens: 514, OutputTokens: 106, CachedTokens: 160, CostUSD: 0.006}
	waits := []record.Wait{
		{Kind: record.WaitPaused},
		{Kind: record.WaitInput, RequestID: "t2-1-input", Question: "favourite colour?"},
		{Kind: record.WaitAuthorization, AttemptID: "t4-1-auth"},
		{Kind: record.WaitTask, TaskID: "task-1", TaskKind: "fetch"},
		{Kind: record.WaitChild, SessionID: "01M8NKS2B7QWJ3D4E5F6G7H8J9"},
		{Kind: record.WaitDebounce, Until: &until},
		{Kind: record.WaitStep},
	}
	full := ingress.Status{
		SessionID: sid, OwnerRunID: "01M8NKQJZXBWH9DN2M14YDVAMD", DeploymentID: "v1", OwnerLive: true, Epoch: 3,
		State: string(record.StateQuarantined), QueueDepth: 2, EventSeq: 13, Tokens: []string{sid, "C123.456"},
		Tags: map[string]string{"tenant": "acme"}, BootAttempts: 3,
		Quarantine: &ingress.QuarantineStatus{Attempts: 3, Error: "process_died", Since: now},
		Usage:      usage,
		Handles: []ingress.HandleStatus{
			{Handle: "researcher", ChildSessionID: "01M8NKS2B7QWJ3D4E5F6G7H8J9", State: wire.HandleActive, DeploymentID: "v1"},
			{Handle: "later", State: wire.HandleAvailable, DeploymentID: "v2"},
		},
		ParentSessionID: "01M8NKR5Q1W7D0S2V8Y4C6B3NE", Depth: 1,
		WaitingFor: waits, OwnerProcess: "owner-01M8NK", Why: "quarantined",
	}
	idle := ingress.Status{SessionID: sid, OwnerRunID: "r", DeploymentID: "v1", State: "active", Idle: true,
		Tokens: []string{sid}, Tags: map[string]string{}, WaitingFor: []record.Wait{}}
	listed := ingress.ListedSession{SessionID: sid, Agent: "default", DeploymentID: "v1", State: "active",
		Tags: map[string]string{"tenant": "acme"}, Aliases: []string{"C123.456"}, ParentSessionID: "01M8NKR5Q1W7D0S2V8Y4C6B3NE",
		CreatedAt: now, WaitingFor: waits[1:2], Why: "input", EventSeq: 8, Usage: usage, LastActivityAt: now.Add(time.Second),
		Storage: &record.Storage{Events: 8, EventBytes: 4096, BlobBytes: 70000}}
	bare := ingress.ListedSession{SessionID: sid, Agent: "default", DeploymentID: "v1", State: "ended",
		Tags: map[string]string{}, Aliases: []string{}, WaitingFor: []record.Wait{}, Why: "ended"}
	errBody := func(e *ingress.Error) []byte { return e.Body() }
	return map[string][][]byte{
		"Error": {
			errBody(&ingress.Error{Err: ingress.ErrBadRequest, Message: "give exactly one of text and payloads"}),
			errBody(&ingress.Error{Err: ingress.ErrConflict, Detail: ingress.CodeUnknownRequest, Message: "not waiting", Expected: []string{}}),
			errBody(&ingress.Error{Err: ingress.ErrConflict, Detail: ingress.CodeUnknownRequest, Message: "not waiting", Expected: []string{"t3-1-input"}}),
			mustJSON(t, ingress.ErrorBody{Error: ingress.ErrorDetail{Code: ingress.CodeNotFound, Message: "no session x"}}),
		},
		"Created": {
			mustJSON(t, ingress.Created{SessionID: sid, DeploymentID: "v1", Created: true}),
			mustJSON(t, ingress.Created{SessionID: sid, DeploymentID: "v1", Created: true, Seq: 1, CommandID: "01M8NKQJZYRW2T8C5VQ4H7D3KA", PreviousSessionID: "01M8NKR5Q1W7D0S2V8Y4C6B3NE"}),
		},
		"Receipt": {
			mustJSON(t, ingress.Receipt{SessionID: sid, Seq: 2, CommandID: "01M8NKR0B9W6C2Q7XG3T5M8E1P", DeploymentID: "v1", OwnerLive: true}),
			mustJSON(t, ingress.Receipt{SessionID: sid, Seq: 14, CommandID: "c", Created: true, DeploymentID: "v1", PreviousSessionID: "01M8NKR5Q1W7D0S2V8Y4C6B3NE"}),
			mustJSON(t, ingress.Receipt{SessionID: sid, DeploymentID: "v1"}), // an end the finisher carries out
		},
		"DeleteResult": {
			mustJSON(t, ingress.DeleteResult{Deleted: &ingress.Deleted{SessionID: sid, Events: 301, Blobs: 4, Bytes: 412377, ChildrenDeleted: []string{}}}),
			mustJSON(t, ingress.DeleteResult{Deleted: &ingress.Deleted{SessionID: sid, ChildrenDeleted: []string{"01M8NKS2B7QWJ3D4E5F6G7H8J9"}}}),
			mustJSON(t, ingress.DeleteResult{Pending: true}),
		},
		"Status": {mustJSON(t, full), mustJSON(t, idle)},
		"CommandOutcome": {
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 14, Status: ingress.CommandPending, CommandID: "c"}),
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 14, Status: ingress.CommandPending}),
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 2, Status: ingress.CommandApplied, CommandID: "c", EventSeq: 7}),
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 14, Status: ingress.CommandRejected, CommandID: "c", EventSeq: 31, Reason: "too_many_tags"}),
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 3, Status: ingress.CommandSuperseded, CommandID: "c", EventSeq: 9, SupersededBy: 5}),
			mustJSON(t, ingress.CommandOutcome{SessionID: sid, Seq: 4, Status: ingress.CommandInvalid, CommandID: "rejected-4", EventSeq: 10, Reason: "unknown kind"}),
		},
		"EventPage": {
			mustJSON(t, ingress.EventPage{SessionID: sid, Events: []json.RawMessage{
				event(t, 9, "message.output", map[string]any{"text": "hello"}),
				event(t, 10, "session.ended", map[string]any{"reason": "terminated", "by": "user"}),
				event(t, 11, "myagent.note", nil),
			}, Next: 11, Ended: true}),
			mustJSON(t, ingress.EventPage{SessionID: sid, Events: []json.RawMessage{}, Next: 8}),
		},
		"Event": {event(t, 1, "turn.started", map[string]any{"turnId": "t1"})},
		"BlobChunk": {
			mustJSON(t, ingress.BlobChunk{Data: []byte("hello, world"), Offset: 0, Size: 12, EOF: true}),
			mustJSON(t, ingress.BlobChunk{Data: []byte{}, Offset: 12, Size: 12, EOF: true}),
			mustJSON(t, ingress.BlobChunk{Data: bytes.Repeat([]byte{0xff, 0}, 100), Offset: 0, Size: 1000}),
		},
		"SessionList": {
			mustJSON(t, ingress.SessionList{Sessions: []ingress.ListedSession{listed, bare}, Next: "MXxh"}),
			mustJSON(t, ingress.SessionList{Sessions: []ingress.ListedSession{}}),
		},
	}
}

func TestResponseSchemas(t *testing.T) {
	all := responses(t)
	for _, name := range responseSchemas {
		t.Run(name, func(t *testing.T) {
			open, closed := compile(t, name, false), compile(t, name, true)
			if len(all[name]) == 0 {
				t.Fatalf("no example of %s", name)
			}
			for _, b := range all[name] {
				if err := valid(t, open, b); err != nil {
					t.Errorf("%s refuses the server's %s: %v", name, b, err)
				}
				if err := valid(t, closed, b); err != nil {
					t.Errorf("%s does not declare a member of the server's %s: %v", name, b, err)
				}
			}
		})
	}
}

// TestResponsesOpen: answers stay open to new members.
func TestResponsesOpen(t *testing.T) {
	for _, name := range responseSchemas {
		var walk func(at string, v any)
		walk = func(at string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if v["additionalProperties"] == false {
					t.Errorf("%s%s: a response schema is closed", name, at)
				}
				for k, x := range v {
					walk(at+"/"+k, x)
				}
			case []any:
				for i, x := range v {
					walk(fmt.Sprintf("%s/%d", at, i), x)
				}
			}
		}
		walk("", schemaDoc(t, name))
	}
}

// TestResponseMembers: the members of each answer's schema are the Go
// type's JSON members, and exactly those it always marshals are required
// (nested objects too).
func TestResponseMembers(t *testing.T) {
	types := map[string]reflect.Type{
		"Created":        reflect.TypeFor[ingress.Created](),
		"Receipt":        reflect.TypeFor[ingress.Receipt](),
		"Status":         reflect.TypeFor[ingress.Status](),
		"CommandOutcome": reflect.TypeFor[ingress.CommandOutcome](),
		"EventPage":      reflect.TypeFor[ingress.EventPage](),
		"Event":          reflect.TypeFor[wire.Event](),
		"BlobChunk":      reflect.TypeFor[ingress.BlobChunk](),
		"SessionList":    reflect.TypeFor[ingress.SessionList](),
		"Error":          reflect.TypeFor[ingress.ErrorBody](),
		"Deleted":        reflect.TypeFor[ingress.Deleted](),
	}
	for name, typ := range types {
		checkStruct(t, name, typ, schemaDoc(t, name))
	}
	// DeleteResult marshals a Deleted or {"pending":true}.
	branches := anySlice(schemaDoc(t, "DeleteResult")["oneOf"])
	if len(branches) != 2 {
		t.Fatalf("DeleteResult: want a oneOf of Deleted and the pending answer")
	}
	checkStruct(t, "DeleteResult/oneOf/0", reflect.TypeFor[ingress.Deleted](), branches[0].(map[string]any))
	checkStruct(t, "DeleteResult/oneOf/1", reflect.TypeFor[struct {
		Pending bool `json:"pending"`
	}](), branches[1].(map[string]any))
}

var timeType = reflect.TypeFor[time.Time]()

func checkStruct(t *testing.T, at string, typ reflect.Type, sch map[string]any) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	props, _ := sch["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	var required []string
	for _, r := range anySlice(sch["required"]) {
		required = append(required, r.(string))
	}
	sort.Strings(required)
	all, always := jsonMembers(typ)
	if !slices.Equal(names, all) {
		t.Errorf("%s: the schema names %v; %s marshals %v", at, names, typ, all)
	}
	if !slices.Equal(required, always) {
		t.Errorf("%s: the schema requires %v; %s always marshals %v", at, required, typ, always)
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		sub, _ := props[name].(map[string]any)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			if ft.Kind() == reflect.Slice && sub != nil {
				sub, _ = sub["items"].(map[string]any)
			}
			ft = ft.Elem()
		}
		if !f.IsExported() || sub == nil || ft.Kind() != reflect.Struct || ft == timeType {
			continue
		}
		checkStruct(t, at+"/"+name, ft, sub)
	}
}

// TestResponsesRefuse: each answer schema refuses what the server never
// answers (a missing member, a wrong type, a value out of its set).
func TestResponsesRefuse(t *testing.T) {
	bad := map[string][]string{
		"Error":          {`{}`, `{"error":{"code":"bad_request"}}`, `{"error":{"code":"","message":"m"}}`},
		"Created":        {`{"sessionId":"s","deploymentId":"v1"}`, `{"sessionId":"s","deploymentId":"v1","created":false}`},
		"Receipt":        {`{"sessionId":"s","seq":-1,"commandId":"c","created":false,"deploymentId":"v1","ownerLive":true}`, `{"sessionId":"s","seq":1,"created":false,"deploymentId":"v1","ownerLive":true}`},
		"DeleteResult":   {`{"pending":false}`, `{"sessionId":"s","events":1,"blobs":0,"bytes":0}`, `{}`},
		"Status":         {`{"sessionId":"s"}`},
		"CommandOutcome": {`{"sessionId":"s","seq":1,"status":"lost","commandId":"c"}`, `{"sessionId":"s","seq":1,"status":"applied"}`},
		"EventPage":      {`{"sessionId":"s","events":null,"next":0,"ended":false}`, `{"sessionId":"s","events":[{"seq":1}],"next":1,"ended":false}`},
		"Event": {
			`{"sessionId":"s","seq":1,"time":"2026-12-06T01:43:19Z","ownerRunId":"r","deploymentId":"v1","kind":"Turn Started","v":1,"data":{}}`,
			`{"sessionId":"s","seq":0,"time":"2026-12-06T01:43:19Z","ownerRunId":"r","deploymentId":"v1","kind":"turn.started","v":1,"data":{}}`,
			`{"sessionId":"s","seq":1,"time":"yesterday","ownerRunId":"r","deploymentId":"v1","kind":"turn.started","v":1,"data":{}}`,
			`{"sessionId":"s","seq":1,"time":"2026-12-06T01:43:19Z","ownerRunId":"r","deploymentId":"v1","kind":"turn.started","v":1,"data":[]}`,
		},
		"BlobChunk":   {`{"data":"!!not base64","offset":0,"size":1,"eof":true}`, `{"data":null,"offset":0,"size":0,"eof":true}`},
		"SessionList": {`{"sessions":null}`, `{"next":"x"}`},
	}
	for name, bodies := range bad {
		sch := compile(t, name, false)
		for _, b := range bodies {
			if err := valid(t, sch, []byte(b)); err == nil {
				t.Errorf("%s accepts %s", name, b)
			}
		}
	}
	// A status without one of its members.
	var st map[string]any
	if err := json.Unmarshal(responses(t)["Status"][0], &st); err != nil {
		t.Fatal(err)
	}
	sch := compile(t, "Status", false)
	for _, k := range []string{"why", "waitingFor", "tokens", "usage", "tags"} {
		cut := make(map[string]any, len(st))
		for m, v := range st {
			if m != k {
				cut[m] = v
			}
		}
		if err := valid(t, sch, mustJSON(t, cut)); err == nil {
			t.Errorf("Status accepts a status without %s", k)
		}
	}
}
