package wire

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"
)

// The typed paths (typed.go, shape.go: the strict decoder) run the Go
// rules instead of the JSON Schema validator. These tests hold them to the
// frozen schema: for any input, the typed path accepts only what the
// reference path (generic parse, migration, compiled schema, strict decode,
// Go rules — the codec as it was before the typed paths) accepts, decodes
// it to the same value, and accepts every strict-JSON current-version
// document the reference accepts. It may decline the rest (repeated member
// names, escaped lone surrogates, version 0), which the reference decides.

var sentinels = []error{ErrUnknownVersion, ErrUnknownKind, ErrInvalid, ErrTooLarge}

func sameSentinel(a, b error) bool {
	for _, s := range sentinels {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return true
}

// agreeCommand checks one input against the reference and returns the
// typed verdict.
func agreeCommand(t testing.TB, b []byte) verdict {
	t.Helper()
	ref, refErr := decodeReference(b)
	fast, v := decodeFast(b)
	if len(b) > MaxCommandBytes {
		v = declined // Decode checks the size before the typed path
	}
	switch {
	case v == accepted && refErr != nil:
		t.Fatalf("typed path accepts what the schema path rejects (%v):\n%q", refErr, b)
	case v == accepted && !reflect.DeepEqual(fast, ref):
		t.Fatalf("typed path and schema path decode differently:\n fast %+v\n  ref %+v\ninput %q", fast, ref, b)
	case v != accepted && refErr == nil && typedReads(b, ref):
		t.Fatalf("typed path declines what the schema path accepts:\n%q", b)
	}
	// Decode as a whole (typed path, migration, fallback) is the reference.
	got, err := Decode(b)
	switch {
	case (err == nil) != (refErr == nil) || !sameSentinel(err, refErr):
		t.Fatalf("Decode: %v, reference: %v\ninput %q", err, refErr, b)
	case err == nil && !reflect.DeepEqual(got, ref):
		t.Fatalf("Decode and reference decode differently:\n  got %+v\n  ref %+v\ninput %q", got, ref, b)
	case err != nil && !sameErrorFields(err, refErr):
		t.Fatalf("Decode error %q, reference %q", err, refErr)
	}
	if err == nil {
		agreeEncode(t, got)
	}
	return v
}

// typedReads reports whether the typed path must accept b, which the
// reference accepts as ref: a document within the size limit, at version
// 5, or at version 4, 3, 2 or 1 without what only a later version has, that is
// strict JSON (no repeated member name, no escaped lone surrogate).
// Everything else the typed path may leave to the reference.
func typedReads(b []byte, ref Command) bool {
	doc, err := parseObject(b)
	if err != nil || len(b) > MaxCommandBytes || !jsontext.Value(b).IsValid() {
		return false
	}
	switch doc["v"] {
	case json.Number("5"):
		return true
	case json.Number("4"):
		return ref.expressibleInV4() == nil
	case json.Number("3"):
		return ref.expressibleInV3() == nil
	case json.Number("2"):
		return ref.expressibleInV2() == nil
	case json.Number("1"):
		return ref.expressibleInV1() == nil
	}
	return false
}

// sameErrorFields compares what a caller reads from two command errors
// (the schema validator's reasons are not deterministic: it may report any
// of several violations).
func sameErrorFields(a, b error) bool {
	var ea, eb *Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return false
	}
	return ea.Version == eb.Version && ea.Kind == eb.Kind && ea.CommandID == eb.CommandID && ea.Err == eb.Err
}

// agreeEncode checks that what Encode produces (Go rules only) passes the
// schema and decodes back to the value.
func agreeEncode(t testing.TB, c Command) {
	t.Helper()
	out, err := Encode(Current(), c)
	if err != nil {
		t.Fatalf("a decoded command does not encode: %v\n%+v", err, c)
	}
	if want, err := marshal(c); err != nil || string(out) != string(want) {
		t.Fatalf("Encode and marshal differ: %v\n got %s\nwant %s", err, out, want)
	}
	if err := debugCheck(commandCurrent(), out); err != nil {
		t.Fatalf("Encode produced what the schema rejects: %v\n%s", err, out)
	}
	back, err := decodeReference(out)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("encode round trip: %v\n got %+v\nwant %+v", err, back, c)
	}
	agreeEncodeDown(t, c, 1, (*Command).expressibleInV1, commandV1())
	agreeEncodeDown(t, c, 2, (*Command).expressibleInV2, commandV2())
	agreeEncodeDown(t, c, 3, (*Command).expressibleInV3, commandV3())
	agreeEncodeDown(t, c, 4, (*Command).expressibleInV4, commandV4())
}

// agreeEncodeDown checks the down-converting encoder of version v (whose
// frozen schema is k) on a decoded command: what version v can express is
// written so that the frozen schema accepts it (a consumer of version v
// reads it) and decodes to the same value (a delivery without a mode
// with mode queue); anything else is refused with ErrUnsupportedTarget
// naming the kind.
func agreeEncodeDown(t testing.TB, c Command, v int, expressible func(*Command) *Error, k *contract) {
	t.Helper()
	out, err := Encode(Capability{V: v}, c)
	if expressible(&c) != nil {
		var we *Error
		if !errors.Is(err, ErrUnsupportedTarget) || !errors.As(err, &we) || we.Kind != string(c.Kind) || we.Version != v {
			t.Fatalf("v%d encoder of a command of a later version: %v\n%+v", v, err, c)
		}
		return
	}
	if err != nil {
		t.Fatalf("v%d encoder: %v\n%+v", v, err, c)
	}
	if err := debugCheck(k, out); err != nil {
		t.Fatalf("v%d encoder produced what the frozen v%d schema rejects: %v\n%s", v, v, err, out)
	}
	want := normalizeCommand(c)
	want.legacyMode()
	if back, err := Decode(out); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("v%d encode round trip: %v\n got %+v\nwant %+v", v, err, back, want)
	}
}

// commandCorpus is every fixture, every invalid table of the tests, and
// mutations of each fixture of version 1 to 5 at every path; built once
// per test binary (corpus), its callers only read it.
func commandCorpus(t testing.TB) [][]byte { return corpus(t, "commands", buildCommandCorpus) }

// corpora holds each corpus built, by name.
var corpora = struct {
	sync.Mutex
	built map[string][][]byte
}{built: map[string][][]byte{}}

// corpus returns the corpus of name, built by build on its first use;
// its callers must not change it.
func corpus(t testing.TB, name string, build func(testing.TB) [][]byte) [][]byte {
	t.Helper()
	corpora.Lock()
	defer corpora.Unlock()
	c, ok := corpora.built[name]
	if !ok {
		c = build(t)
		corpora.built[name] = c
	}
	return c
}

func buildCommandCorpus(t testing.TB) [][]byte {
	var out [][]byte
	for v := 0; v <= CurrentVersion; v++ {
		paths, err := globAll(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			raw := readFile(t, p)
			out = append(out, raw)
			if v >= 1 {
				out = append(out, mutations(t, raw, len(out), corpusRead)...)
			}
		}
	}
	for _, tt := range decodeRejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, tt := range v0RejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, tt := range v2DecodeRejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, tt := range v3DecodeRejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, tt := range v4DecodeRejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, tt := range v5DecodeRejectCases {
		out = append(out, []byte(tt.in))
	}
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	for _, s := range []string{
		`{"v":1,"kind":"cancel","kind":"reset",` + env + `}`,
		`{"v":1,"kind":"cancel",` + env + `,"caller":""}`,
		`{"v":1,"kind":"cancel",` + env + `,"idempotencyKey":""}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T1:00:00Z"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T01:00:00,5Z"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T01:00:00+24:00"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T01:00:00+23:59"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01t01:00:00z"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T01:00:00\u005a"}`,
		`{"v":1,"kind":"cancel","id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T23:59:60Z"}`,
		`{"v":1,"kind":"cancel","\u0069d":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"}`,
		`{"v":1,"\u212Aind":"cancel",` + env + `}`,
		`{"v":1.0,"kind":"cancel",` + env + `}`,
		`{"v":1e0,"kind":"cancel",` + env + `}`,
		`{"v":1,"v":1,"kind":"cancel",` + env + `}`,
		`{"kind":"cancel","v":1,` + env + `}`,
		`{"kind":"cancel",` + env + `,"v":1}`,
		` {"v":1,"kind":"cancel",` + env + `} `,
		`{"v":1,"kind":"task.result",` + env + `,"taskResult":{"taskId":"t","result":null}}`,
		`{"v":1,"kind":"task.result",` + env + `,"taskResult":{"taskId":"t","result":null,"error":"e"}}`,
		`{"v":1,"kind":"task.result",` + env + `,"taskResult":{"taskId":"t","result":1,"error":""}}`,
		`{"v":1,"kind":"input.response",` + env + `,"inputResponse":{"requestId":"r"}}`,
		`{"v":1,"kind":"input.response",` + env + `,"inputResponse":{"requestId":"` + strings.Repeat("é", 128) + `","value":1}}`,
		`{"v":1,"kind":"input.response",` + env + `,"inputResponse":{"requestId":"` + strings.Repeat("é", 129) + `","value":1}}`,
		`{"v":1,"kind":"auth.callback",` + env + `,"authCallback":{"attemptId":"a","result":"granted","data":null}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"context":[]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"context":[null]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"ext":{}}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"ext":{"":1}}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"ext":{"a":1,"a":{ "b" : [ ] }}}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"outputSchema":{}},{"message":""}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"outputSchema":[]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":[]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":[{"type":"image","url":"` + strings.Repeat("u", 4097) + `"}]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":[{"type":"text","text":"a","name":"` + strings.Repeat("n", 256) + `"}]}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":"a\ud800b\u00e9\ud83d\ude00\n\"\\\/"}]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":"hi"}],"payloads":[]}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":"hi"}]},"deliver":{"mode":"steer"}}`,
		`{"v":1,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"inputResponses":[{"requestId":"r","value":{"a" : 1}}]}]}}`,
		`{"v":1,"kind":"move",` + env + `,"move":{"deploymentId":"d","force":null}}`,
		`{"v":1,"kind":"move",` + env + `,"move":{"deploymentId":"d","force":false}}`,
		`{"v":1,"kind":"timeout",` + env + `,"timeout":{"timerId":"t","deadline":"2026-01-01T00:00:00.123456789123Z"}}`,
		`{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p","handle":"h","depth":4}`,
		`{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p","handle":"h","depth":-0}`,
		`{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p","handle":"h","depth":1e0}`,
		`{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"p","handle":"h","depth":1,"depth":2}`,
		`{"v":2,"kind":"cancel",` + env + `,"parentSessionId":"` + strings.Repeat("p", 129) + `","handle":"h","depth":1}`,
		`{"v":2,"kind":"end",` + env + `}`,
		`{"v":2,"kind":"child.result",` + env + `,"childResult":{"handle":"h","childSessionId":"s","commandId":"c","turnId":"t","outcome":"cancelled","outputs":[],"usage":{}}}`,
		`{"v":2,"kind":"child.result",` + env + `,"childResult":{"handle":"h","childSessionId":"s","commandId":"c","turnId":"t","outcome":"done","usage":{"inputTokens":-0,"costUsd":-0.0}}}`,
		`{"v":2,"kind":"child.result",` + env + `,"childResult":{"handle":"h","childSessionId":"s","commandId":"c","turnId":"t","outcome":"done","usage":{"costUsd":1e-7,"outputTokens":9223372036854775807}}}`,
		`{"v":2,"kind":"child.result",` + env + `,"childResult":{"handle":"h","childSessionId":"s","commandId":"c","turnId":"t","outcome":"done","usage":{"outputTokens":9223372036854775808}}}`,
		`{"v":2,"kind":"child.waiting",` + env + `,"childWaiting":{"handle":"h","childSessionId":"s","attemptId":"a","question":""}}`,
		`{"v":2,"kind":"child.resumed",` + env + `,"childResumed":{"handle":"h","childSessionId":"s","requestId":"` + strings.Repeat("é", 128) + `"}}`,
		`{"v":2,"kind":"child.resumed",` + env + `,"childResumed":{"handle":"h","childSessionId":"s","requestId":"` + strings.Repeat("é", 129) + `"}}`,
		`{"v":1,"kind":"cancel",` + env + `,"depth":1}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"` + strings.Repeat("é", 128) + `"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"` + strings.Repeat("v", 256) + `","` + strings.Repeat("k", 64) + `":""}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"\u00e9\n\"","az09_.-":"x"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"a\ud800"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{` + jsonTags(16) + `},"remove":["a"]}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"remove":["` + strings.Join(manyKeys(16), `","`) + `"]}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"remove":["a"],"set":{"b":"c"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"remove":["a"]},"tag":{"set":{"b":"c"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"\u0061":"b"}}}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}},"parentSessionId":"p","handle":"h","depth":1}`,
		`{"v":3,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","payloads":[{"message":"hi"}]}}`,
		`{"v":3,"kind":"end",` + env + `,"parentSessionId":"p","handle":"h","depth":1}`,
		`{"v":4,"kind":"terminate",` + env + `}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{"message":"` + strings.Repeat("é", 128) + `"}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{"message":"` + strings.Repeat("m", 256) + `"}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{"message":"\u00e9\n\"\u0000"}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{"message":"a\ud800"}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{"message":"a"},"terminate":{}}`,
		`{"v":4,"kind":"terminate",` + env + `,"terminate":{},"terminate":{"message":""}}`,
		`{"v":4,"kind":"terminate",` + env + `,"caller":"slack:U42","idempotencyKey":"k","terminate":{"message":"bye"}}`,
		`{"v":4,"kind":"terminate",` + env + `,"depth":1}`,
		`{"v":4,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}}}`,
		`{"v":4,"kind":"end",` + env + `,"parentSessionId":"p","handle":"h","depth":1}`,
		`{"v":3,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}},"terminate":{"message":"x"}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":250,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":600000,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":-0,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":1e3,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":1000.0,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":9223372036854775808,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":500,"debounceMs":600,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","mode":"debounce","debounceMs":500,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"deliver":{"mode":"\u0064ebounce","debounceMs":500,"payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"deliver",` + env + `,"parentSessionId":"p","handle":"h","depth":1,"deliver":{"mode":"rollback","payloads":[{"message":"hi"}]}}`,
		`{"v":5,"kind":"configure",` + env + `,"configure":{"defaultMode":"steer"}}`,
		`{"v":5,"kind":"configure",` + env + `,"configure":{"defaultMode":"debounce","defaultDebounceMs":250}}`,
		`{"v":5,"kind":"configure",` + env + `,"configure":{"defaultMode":"debounce","defaultDebounceMs":-0}}`,
		`{"v":5,"kind":"configure",` + env + `,"configure":{"defaultMode":"queue"},"configure":{"defaultMode":"latest"}}`,
		`{"v":5,"kind":"configure",` + env + `,"depth":1,"configure":{"defaultMode":"queue"}}`,
		`{"v":5,"kind":"terminate",` + env + `,"configure":{"defaultMode":"queue"}}`,
		`{"v":5,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}}}`,
		`{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"","payloads":[{"message":"hi"}]}}`,
		`{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"steer","payloads":[{"message":"hi"}]}}`,
		`{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":5,"payloads":[{"message":"hi"}]}}`,
		`{"v":4,"kind":"deliver",` + env + `,"deliver":{"mode":"queue","debounceMs":null,"payloads":[{"message":"hi"}]}}`,
		`{"v":4,"kind":"cancel",` + env + `,"deliver":{"payloads":[{"message":"hi"}]}}`,
		`{"v":3,"kind":"deliver",` + env + `,"deliver":{"payloads":[{"message":"hi"}]}}`,
		`{"v":2,"kind":"deliver",` + env + `,"deliver":{"mode":"debounce","debounceMs":500,"payloads":[{"message":"hi"}]}}`,
		`{"type":"deliver","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","mode":"latest","payloads":[{"message":"x"}]}`,
		`{"message":"x","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","context":[]}`,
		`{"message":"x","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","caller":""}`,
		`{"type":"deliver","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","payloads":[{"message":"x","Message":1}]}`,
		`{"type":"deliver","commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z","payloads":[{"":1}]}`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

// globAll lists every JSON file of a version, expected normalizations
// (*.want.json) included.
func globAll(v int) ([]string, error) {
	return filepath.Glob(fmt.Sprintf("testdata/v%d/*.json", v))
}

// mutations replaces, removes, renames and adds members at every path of a
// fixture, one change per output.
// mutations returns raw changed at every path: each value of a fixed
// list put there, the member removed, its name capitalised, a member
// added. Entry k is built only if read(base+k), else it is nil: base is
// the index the first entry will have in its caller's corpus, and read
// says which entries the caller's tests read (checked, seeded), so a
// mutation no test reads is never cloned or marshalled.
func mutations(t testing.TB, raw []byte, base int, read func(int) bool) [][]byte {
	doc, err := parseDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	values := []any{nil, "", "x", "latest", "a.b", strings.Repeat("é", 129), strings.Repeat("a", 257),
		json.Number("0"), json.Number("1"), json.Number("-1"), json.Number("1.5"), true, false,
		[]any{}, []any{"x"}, []any{map[string]any{}}, map[string]any{}, map[string]any{"a": json.Number("1")},
		"2026-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "queue", "steer", "text", "image", "granted",
		"deliver", "cancel", "move", "timeout", "task.result",
		"child.result", "child.waiting", "child.resumed", "end", "done", "failed", "cancelled",
		json.Number("2"), json.Number("4"), json.Number("5"), json.Number("1.0"), json.Number("1e400"),
		"tag", "A", []any{"x", "x"}, map[string]any{"x": "y"}, map[string]any{"A": "y"},
		json.Number("3"),
		"terminate", "terminated", "idle_expired", "user", map[string]any{"message": "m"},
		"debounce", "interrupt", "configure", json.Number("250"),
	}
	var out [][]byte
	emit := func(d func() any) {
		if !read(base + len(out)) {
			out = append(out, nil)
			return
		}
		b, err := marshal(d())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	var walk func(path []any)
	walk = func(path []any) {
		node := at(doc, path)
		switch n := node.(type) {
		case map[string]any:
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := append(slices.Clone(path), k)
				for _, v := range values {
					emit(func() any { return edit(doc, p, func(any) (any, bool) { return v, true }) })
				}
				emit(func() any { return edit(doc, p, func(any) (any, bool) { return nil, false }) })
				emit(func() any {
					return editParent(doc, p, func(m map[string]any) {
						m[strings.ToUpper(k[:1])+k[1:]] = m[k]
						delete(m, k)
					})
				})
				walk(p)
			}
			emit(func() any {
				return edit(doc, path, func(v any) (any, bool) {
					m := clone(v).(map[string]any)
					m["zz"] = json.Number("1")
					return m, true
				})
			})
		case []any:
			for i := range n {
				p := append(slices.Clone(path), i)
				for _, v := range values {
					emit(func() any { return edit(doc, p, func(any) (any, bool) { return v, true }) })
				}
				walk(p)
			}
		}
	}
	walk(nil)
	return out
}

func at(doc any, path []any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			doc = doc.(map[string]any)[k]
		case int:
			doc = doc.([]any)[k]
		}
	}
	return doc
}

// edit returns a deep copy of doc with the value at path replaced (or
// removed when keep is false).
func edit(doc any, path []any, f func(any) (any, bool)) any {
	root := clone(doc)
	if len(path) == 0 {
		v, _ := f(root)
		return v
	}
	parent := at(root, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		m := parent.(map[string]any)
		if v, keep := f(m[k]); keep {
			m[k] = v
		} else {
			delete(m, k)
		}
	case int:
		s := parent.([]any)
		v, _ := f(s[k])
		s[k] = v
	}
	return root
}

func editParent(doc any, path []any, f func(map[string]any)) any {
	root := clone(doc)
	f(at(root, path[:len(path)-1]).(map[string]any))
	return root
}

func clone(v any) any {
	switch n := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, e := range n {
			m[k] = clone(e)
		}
		return m
	case []any:
		s := make([]any, len(n))
		for i, e := range n {
			s[i] = clone(e)
		}
		return s
	}
	return v
}

func TestSchemaAgreement(t *testing.T) {
	t.Parallel() // pure functions of immutable inputs
	counts := map[verdict]int{}
	for i, b := range commandCorpus(t) {
		if checked(i) {
			counts[agreeCommand(t, b)]++
		}
	}
	t.Logf("typed path: %d accepted, %d declined", counts[accepted], counts[declined])
	if counts[accepted] < 14 || counts[declined] < 100 {
		t.Fatalf("the corpus does not exercise the fast path: %v", counts)
	}
}

// Encode no longer runs the schema: whatever it accepts must pass it, and
// what it rejects stays rejected (encodeRejectCases), for every fixture and
// every change of the encode table.
func TestEncodeSchemaAgreement(t *testing.T) {
	for _, tt := range encodeRejectCases {
		c := validDeliver()
		tt.change(&c)
		if _, err := Encode(Current(), c); err == nil {
			t.Errorf("%s: Encode accepts", tt.name)
		}
	}
	for v := 1; v <= CurrentVersion; v++ {
		for _, p := range fixtures(t, v) {
			c, err := Decode(readFile(t, p))
			if err != nil {
				t.Fatal(err)
			}
			agreeEncode(t, c)
		}
	}
}

// FuzzSchemaAgreement: for any input, the typed fast path accepts exactly
// what the schema path accepts, with the same value; Decode as a whole
// returns what the schema path returns.
func FuzzSchemaAgreement(f *testing.F) {
	for i, b := range commandCorpus(f) {
		if len(b) <= 4096 && seeded(i) {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		agreeCommand(t, b)
	})
}

// Events.

// agreeRegistries are the registries events are checked with: none, the
// built-ins, and the built-ins plus agent kinds with a plain and a tagged
// data type.
func agreeRegistries(t testing.TB) []*EventRegistry {
	reg := DefaultEvents()
	type plainRef struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	}
	type plainNote struct {
		Note   string            `json:"note"`
		Level  int               `json:"level,omitempty"`
		Tags   []string          `json:"tags,omitempty"`
		Ref    *plainRef         `json:"ref,omitempty"`
		Extra  json.RawMessage   `json:"extra,omitempty"`
		Labels map[string]string `json:"labels,omitempty"`
		At     *time.Time        `json:"at,omitempty"`
	}
	type taggedNote struct {
		Note string `json:"note" jsonschema:"minLength=3,maxLength=5"`
		N    int    `json:"n,omitempty" jsonschema:"minimum=2"`
	}
	if err := errors.Join(
		RegisterEvent[plainNote](reg, "acme.plain", nil),
		RegisterEvent[taggedNote](reg, "acme.tagged", nil),
	); err != nil {
		t.Fatal(err)
	}
	if reg.spec("acme.plain").shape == nil || reg.spec("acme.tagged").shape != nil {
		t.Fatal("acme.plain has no shape or acme.tagged has one")
	}
	return []*EventRegistry{nil, DefaultEvents(), reg}
}

// agreeEvent checks one input with every registry.
func agreeEvent(t testing.TB, regs []*EventRegistry, b []byte) verdict {
	t.Helper()
	worst := accepted
	for _, reg := range regs {
		ref, refErr := decodeEventReference(reg, b)
		got, err := DecodeEvent(reg, b)
		switch {
		case (err == nil) != (refErr == nil) || !sameSentinel(err, refErr):
			t.Fatalf("DecodeEvent: %v, reference: %v\ninput %s", err, refErr, b)
		case !reflect.DeepEqual(got, ref):
			t.Fatalf("DecodeEvent and reference decode differently:\n  got %+v\n  ref %+v\ninput %s", got, ref, b)
		}
		v := eventVerdict(reg, b)
		switch {
		case v == accepted && refErr != nil:
			t.Fatalf("typed path accepts what the schema path rejects (%v):\n%s", refErr, b)
		case v != accepted && refErr == nil && jsontext.Value(b).IsValid() && len(b) <= MaxEventBytes:
			t.Fatalf("typed path declines what the schema path accepts:\n%s", b)
		}
		worst = min(worst, v)
	}
	return worst
}

// eventVerdict is the fast path's own verdict (accepted includes an unknown
// kind or version reported with a valid envelope).
func eventVerdict(reg *EventRegistry, b []byte) verdict {
	if len(b) > MaxEventBytes {
		return declined
	}
	e, v := decodeEventFast(b)
	if v != accepted || reg == nil {
		return v
	}
	v, err := reg.checkFast(&e)
	if errors.Is(err, ErrUnknownKind) || errors.Is(err, ErrUnknownVersion) {
		return declined
	}
	if err != nil {
		return declined
	}
	return v
}

// eventCorpus is the events the agreement tests check (built once,
// corpus).
func eventCorpus(t testing.TB) [][]byte { return corpus(t, "events", buildEventCorpus) }

func buildEventCorpus(t testing.TB) [][]byte {
	var out [][]byte
	add := func(e Event) {
		b, err := marshal(normalizeEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		out = append(out, mutations(t, b, len(out), corpusRead)...)
	}
	kinds := make([]string, 0, len(builtinSamples))
	for k := range builtinSamples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		add(envelope(k, builtinSamples[k]))
	}
	add(envelope(EventMessageOutput, MessageOutput{Ref: &ref}))
	for _, b := range versionedSamples {
		e, err := NewBodyEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		env := envelope(e.Kind, nil)
		env.V, env.Data = e.V, e.Data
		add(env)
	}
	add(envelope("acme.plain", map[string]any{"note": "n", "level": 2, "tags": []string{"a"},
		"ref": map[string]any{"id": "c", "seq": 1}, "extra": nil, "labels": map[string]string{"a": "b"}, "at": "2026-01-01T00:00:00Z"}))
	add(envelope("acme.tagged", map[string]any{"note": "abcd", "n": 3}))
	for _, tt := range malformedEventData {
		out = append(out, rawEvent(tt.kind, tt.data))
	}
	for _, data := range slices.Concat(endedV4Malformed, endedV4Valid) {
		out = append(out, rawEventV(EventSessionEnded, 4, data))
	}
	for _, tt := range envelopeRejectCases {
		out = append(out, []byte(tt.in))
	}
	for _, s := range []string{
		`{"kind":"x"}`,
		string(rawEvent("turn.started", `{"turnId":"t1","turnId":"t2"}`)),
		string(rawEvent("handoff.started", `{"handoffId":"h","targetDeploymentId":"d","trigger":{"commandId":"c","seq":1},"trigger":{"seq":2}}`)),
		string(rawEvent("wire.rejected", `{"seq":1,"reason":"r","version":-1}`)),
		string(rawEvent("input.requested", `{"requestId":"r"}`)),
		string(rawEvent("command.applied", `{"commandId":"c","seq":1.0,"kind":"k"}`)),
		string(rawEvent("acme.plain", `{"note":"n","at":"2026-01-01T1:00:00Z"}`)),
		string(rawEvent("acme.plain", `{"note":"n","labels":{"a":null}}`)),
		string(rawEvent("acme.plain", `{"note":"n","Note":"m"}`)),
		string(rawEvent("acme.tagged", `{"note":"ab"}`)),
		strings.Replace(string(rawEvent("turn.started", `{"turnId":"t1"}`)), `"seq":7`, `"seq":7,"seq":8`, 1),
		strings.Replace(string(rawEvent("turn.started", `{"turnId":"t1"}`)), `"kind":"turn.started"`, `"kind":"turn..started"`, 1),
		strings.Replace(string(rawEvent("turn.started", `{"turnId":"t1"}`)), `"ownerRunId":"run-1"`, `"ownerRunId":""`, 1),
		strings.Replace(string(rawEvent("turn.started", `{"turnId":"t1"}`)), `"v":1`, `"v":2`, 1),
	} {
		out = append(out, []byte(s))
	}
	return out
}

func TestEventSchemaAgreement(t *testing.T) {
	t.Parallel() // pure functions of immutable inputs
	regs := agreeRegistries(t)
	counts := map[verdict]int{}
	for i, b := range eventCorpus(t) {
		if checked(i) {
			counts[agreeEvent(t, regs, b)]++
		}
	}
	t.Logf("typed path (worst over registries): %d accepted, %d declined", counts[accepted], counts[declined])
	if counts[accepted] < 20 || counts[declined] < 100 {
		t.Fatalf("the corpus does not exercise the fast path: %v", counts)
	}
	for _, k := range DefaultEvents().Kinds() {
		if DefaultEvents().spec(k).shape == nil {
			t.Errorf("built-in kind %s is checked against its schema at runtime", k)
		}
	}
}

// FuzzEventSchemaAgreement: for any input and registry, the typed event
// path accepts exactly what the schema path accepts, with the same value.
func FuzzEventSchemaAgreement(f *testing.F) {
	for i, b := range eventCorpus(f) {
		if seeded(i) {
			f.Add(b)
		}
	}
	regs := agreeRegistries(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		agreeEvent(t, regs, b)
	})
}

// TestCheckpointEncodeAgreement holds the Go rules of EncodeCheckpoint (the
// only check on the commit path) to the frozen schema: for random
// checkpoints, whatever EncodeCheckpoint accepts the schema accepts (the Go
// rules may be stricter, never weaker).
func TestCheckpointEncodeAgreement(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := genCheckpoint(rt)
		_, encErr := EncodeCheckpoint(c)
		n := normalizeCheckpoint(c)
		n.StateV = n.lowestVersion()
		n.stampStored(StoredCommandVersion) // as EncodeCheckpoint writes them
		b, err := marshal(n)
		if err != nil {
			rt.Fatal(err)
		}
		doc, err := parseDoc(b)
		if err != nil {
			rt.Fatal(err)
		}
		schemaErr := checkpointContract(n.StateV).check(doc)
		if encErr == nil && schemaErr != nil { // the Go rules may be stricter, never weaker
			rt.Fatalf("EncodeCheckpoint: %v, schema: %v\n%s", encErr, schemaErr, b)
		}
	})
}

// genCheckpoint draws a valid checkpoint with at most one field perturbed
// (empty, negative or out of its enum), so each constraint is met alone.
func genCheckpoint(rt *rapid.T) Checkpoint {
	fault := rapid.IntRange(0, 45).Draw(rt, "fault")
	str := func(n int, ok string) string {
		if fault == n {
			return ""
		}
		return ok
	}
	dur := func(n int) time.Duration {
		if fault == n {
			return -time.Second
		}
		return time.Second
	}
	c := Checkpoint{SessionID: "s1", Tokens: []string{"s1", str(1, "alias")}, Timeout: dur(2),
		History: []HistoryEntry{{Role: str(3, "user"), Text: "t"}},
		Timer:   &Timer{ID: str(4, "run1"), Deadline: time.Unix(1700000000, 0), Duration: dur(5)},
		Waits: Waits{Input: &InputWait{RequestID: str(6, "r1")}, Auth: &AuthWait{AttemptID: str(7, "a1")},
			Tasks: []TaskWait{{ID: str(8, "k1"), Duration: dur(9)}}},
		Turn:            TurnState{Live: true, ID: "t1", Inputs: []TurnInput{{Seq: 1, ID: str(10, "c1"), Kind: Kind(str(11, "deliver"))}}},
		HistorySegments: []BlobRef{NewBlobRef([]byte("x"))},
	}
	c.Ended = rapid.SampledFrom([]string{"", EndDone, EndExpired, EndFailed, EndClosed, EndTerminated, EndIdleExpired}).Draw(rt, "ended")
	if fault == 12 {
		c.Ended = "other"
	}
	if fault == 0 {
		c.HistorySegments = append(c.HistorySegments, BlobRef{Digest: "sha256:00"})
	}
	if fault > 12 || rapid.Bool().Draw(rt, "children") {
		genChildren(&c, fault)
	}
	if fault > 26 || rapid.Bool().Draw(rt, "pending") {
		genPending(&c, fault)
	}
	if fault > 30 || rapid.Bool().Draw(rt, "tags") {
		genTags(&c, fault)
	}
	if fault > 33 || rapid.Bool().Draw(rt, "busy") {
		genBusy(&c, fault)
	}
	return c
}

// genBusy adds the content of state version 9 to c, with the field of
// fault (34..45) perturbed.
func genBusy(c *Checkpoint, fault int) {
	str := func(n int, ok string) string {
		if fault == n {
			return ""
		}
		return ok
	}
	num := func(n, bad, ok int) int {
		if fault == n {
			return bad
		}
		return ok
	}
	c.DefaultMode, c.DefaultDebounceMs = ModeDebounce, int64(num(35, 100, 2000))
	switch fault {
	case 34:
		c.DefaultMode = "later"
	case 43:
		c.DefaultMode = ModeQueue
	}
	at := time.Unix(1700000000, 0)
	c.Debounce = &DebounceWindow{OpenedAt: at, Until: at.Add(time.Duration(num(44, -1, 1)) * time.Second), TimerID: str(36, "d1"),
		Inputs: []TurnInput{{Seq: 3, ID: str(38, "c3"), Kind: KindDeliver, Mode: ModeDebounce, Text: "x"}}}
	if fault == 37 {
		c.Debounce.Inputs = nil
	}
	c.Turn.Before = &TurnBefore{State: json.RawMessage(`{"n":1}`), HistoryLen: num(42, -1, 1)}
	c.Turn.Calls = []CallRef{{Name: str(39, "charge"), Step: uint64(num(40, 0, 1)), Position: num(41, -1, 0)}}
	mode := ModeInterrupt
	if fault == 45 {
		mode = "later"
	}
	c.Turn.Inputs = append(c.Turn.Inputs, TurnInput{Seq: 4, ID: "c4", Kind: KindDeliver, Mode: mode, Text: "y"})
	c.History = append(c.History, HistoryEntry{Role: RoleSystem, Kind: EntryStepInterrupted, Content: []Part{{Type: PartText, Text: "step 1 interrupted"}}})
}

// genTags adds the content of state version 7 to c, with the entry of
// fault (31..33) perturbed.
func genTags(c *Checkpoint, fault int) {
	c.Tags = map[string]string{"env": "prod", "note": "", "owner": "Zoë"}
	switch fault {
	case 31:
		c.Tags["Bad key"] = "x"
	case 32:
		c.Tags["env"] = strings.Repeat("é", MaxTagValueBytes/2+1)
	case 33:
		maps.Copy(c.Tags, manyTags(MaxTags, "v"))
	}
}

// genChildren adds the content of state version 5 to c, with the field of
// fault (13..26) perturbed.
func genChildren(c *Checkpoint, fault int) {
	str := func(n int, ok string) string {
		if fault == n {
			return ""
		}
		return ok
	}
	num := func(n, bad, ok int) int {
		if fault == n {
			return bad
		}
		return ok
	}
	c.Handles = []HandleState{
		{Handle: str(14, "h1"), Generation: num(15, 0, 1), DeploymentID: str(16, "d1"), State: str(17, HandleActive),
			CommandID: str(18, "c1"), ChildSessionID: "s2"},
		{Handle: map[bool]string{true: "h1", false: "h2"}[fault == 19], Generation: 1, DeploymentID: "d1", State: HandleParked},
	}
	c.ChildWaits = []ChildWait{{Handle: str(20, "h1"), ChildSessionID: str(21, "s2"), RequestID: str(22, "r1")}}
	c.Parent = &ParentRef{SessionID: str(23, "s0"), Handle: "p", Depth: num(24, 0, 1)}
	send := validDeliver()
	send.Deliver.Mode = str(25, ModeQueue)
	c.Sends = []Send{{SessionID: str(26, "s2"), Command: send}}
	c.Turn.Delegated, c.Turn.Outputs = true, []string{"o"}
	c.Turn.Inputs = append(c.Turn.Inputs, TurnInput{Seq: 2, ID: "c2", Kind: KindChildResult,
		Child: &ChildRef{Handle: "h1", SessionID: "s2"}, Parent: &ParentRef{SessionID: "s0", Handle: "p", Depth: 1}})
}

// TestCheckpointSchemaAgreement holds the checkpoint's Go rules (the only
// check on the commit path) to its frozen schema: for the fixture and every
// one-change mutation of it, DecodeCheckpoint accepts exactly what the
// schema plus the Go rules accept.
//
// The versions are independent (pure functions of their own fixture), so
// they run in parallel: the package's longest test under -race.
func TestCheckpointSchemaAgreement(t *testing.T) {
	t.Parallel()
	for v := MinStateVersion; v <= CurrentStateVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			t.Parallel()
			checkpointAgreement(t, fmt.Sprintf("testdata/checkpoint/state_v%d.json", v))
		})
	}
}

// seeded reports whether the corpus input at index i is a seed of an
// agreement fuzz target: every one when fuzzing (-test.fuzz set, the
// engine starts from them), else one in 64. Without -fuzz a fuzz target
// runs its seeds as a plain test, and TestSchemaAgreement and
// TestEventSchemaAgreement check the very same corpora in the same run
// (with counts besides): the sample keeps the targets' own function
// honest without checking every input twice.
func seeded(i int) bool { return fuzzing() || i%64 == 0 }

// corpusStride: the agreement tests (commands, events, checkpoints of
// every state version) check every corpus entry under make soak, and every
// fourth one (a fixed selection, the unmutated fixture included) in make
// test's pass without the race detector; its race pass checks every
// sixteenth (testsize.PickRaced: the whole corpora took five minutes of
// CPU under the race detector, every fourth entry two).
var corpusStride = testsize.PickRaced(4, 16, 1)

// checked reports whether an agreement test checks corpus entry i.
func checked(i int) bool { return i%corpusStride == 0 }

// corpusRead reports whether a test reads entry i of a corpus: an
// agreement test checks it or a fuzz target seeds with it.
func corpusRead(i int) bool { return checked(i) || seeded(i) }

// fuzzing reports whether this run is fuzzing (-test.fuzz set).
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

func checkpointAgreement(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	inputs := append([][]byte{raw}, mutations(t, raw, 1, checked)...)
	disagree := 0
	for i, b := range inputs {
		if !checked(i) {
			continue
		}
		_, fast := DecodeCheckpoint(b)
		ref := checkpointReference(b)
		if (fast == nil) != (ref == nil) {
			disagree++
			t.Errorf("DecodeCheckpoint: %v, schema+rules: %v\ninput %s", fast, ref, b)
		}
	}
	if len(inputs)/corpusStride < 50 || disagree > 0 {
		t.Fatalf("%d inputs checked of %d, %d disagreements", len(inputs)/corpusStride, len(inputs), disagree)
	}
}

func checkpointReference(b []byte) error {
	doc, err := parseObject(b)
	if err != nil {
		return err
	}
	v, err := stateVersionOf(doc)
	if err != nil {
		return err
	}
	if err := checkpointContract(v).check(doc); err != nil {
		return err
	}
	var c Checkpoint
	if err := unmarshalStrict(b, &c); err != nil {
		return err
	}
	c = normalizeCheckpoint(c)
	return c.validate()
}
