package wire

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Version 3 contract: every frozen fixture decodes (lifted to the current
// version), re-encodes through the version-3 encoder to the same bytes,
// which validate against the frozen version-3 schema file, and decodes
// back to the same value; every kind of version 3 has a fixture.
func TestV3Fixtures(t *testing.T) {
	frozenSchema := frozenValidator(t, 3)
	seen := map[Kind]bool{}
	for _, path := range fixtures(t, 3) {
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
			// Byte-frozen at the version the fixture declares (3), also after
			// a bump, through that version's encoder.
			out, err := Encode(Capability{V: 3}, c)
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
		if !seen[k] && !v4Kinds[string(k)] && !v5Kinds[string(k)] {
			t.Errorf("no v3 fixture of kind %q", k)
		}
	}
}

// A version-2 document is a version-3 one: each v2 fixture and its v3 copy
// decode to the same command, and the version-2 encoder writes that
// command back as the v2 fixture, byte for byte.
func TestV2FixturesAreV3(t *testing.T) {
	for _, path := range fixtures(t, 2) {
		v2, err := Decode(readFile(t, path))
		if err != nil {
			t.Fatal(err)
		}
		v3, err := Decode(readFile(t, filepath.Join("testdata/v3", filepath.Base(path))))
		if err != nil || !reflect.DeepEqual(v2, v3) {
			t.Fatalf("%s: v2 and v3 decode differently (%v):\n v2 %+v\n v3 %+v", path, err, v2, v3)
		}
		out, err := encodeV2(v3)
		if want := bytes.TrimRight(readFile(t, path), "\n"); err != nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: v2 encoder (%v):\n got %s\nwant %s", path, err, out, want)
		}
	}
}

// The version-2 encoder refuses what version 2 cannot express — the kind
// tag and its body — with ErrUnsupportedTarget naming the kind, never
// downgrading it; so does the version-1 encoder.
func TestV2EncoderRefusesV3Content(t *testing.T) {
	for _, name := range []string{"tag", "tag-remove"} {
		c, err := Decode(readFile(t, "testdata/v3/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int{2, 1} {
			_, err = Encode(Capability{V: v}, c)
			var we *Error
			if !errors.Is(err, ErrUnsupportedTarget) || !errors.As(err, &we) || we.Kind != string(KindTag) ||
				we.Version != v || we.CommandID != c.ID || !strings.Contains(we.Reason, `kind "tag" needs inbox version 3`) {
				t.Errorf("%s for v%d: err = %#v, want ErrUnsupportedTarget naming kind tag and version 3", name, v, err)
			}
		}
	}
	// A tag body on another kind is refused as well (it is not version 2).
	c := validDeliver()
	c.Tag = &Tag{Remove: []string{"env"}}
	if _, err := Encode(Capability{V: 2}, c); !errors.Is(err, ErrUnsupportedTarget) {
		t.Errorf("a tag body for v2: err = %v, want ErrUnsupportedTarget", err)
	}
}

// A document that declares version 2 (or 1) and uses what only version 3
// has was never written by such a producer: it is rejected, not lifted.
func TestV2DocumentWithV3ContentIsRejected(t *testing.T) {
	for _, name := range []string{"tag", "tag-remove"} {
		for _, v := range []int{2, 1} {
			raw := bytes.Replace(readFile(t, "testdata/v3/"+name+".json"), []byte(`{"v":3,`), []byte(fmt.Sprintf(`{"v":%d,`, v)), 1)
			_, err := Decode(raw)
			var we *Error
			if !errors.Is(err, ErrUnknownKind) || !errors.As(err, &we) || we.Version != v || we.Kind != string(KindTag) {
				t.Errorf("%s at v%d: err = %v, want ErrUnknownKind at v%d", name, v, err, v)
			}
		}
	}
	raw := bytes.Replace(readFile(t, "testdata/v2/cancel.json"), []byte(`"v":2,`), []byte(`"v":2,"tag":{"remove":["env"]},`), 1)
	_, err := Decode(raw)
	var we *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != 2 || !strings.Contains(we.Reason, "needs version 3") {
		t.Errorf("member tag at v2: err = %v, want ErrInvalid at v2", err)
	}
}

func validTag() Command {
	c := validDeliver()
	c.Kind, c.Deliver = KindTag, nil
	c.Tag = &Tag{Set: map[string]string{"env": "prod"}, Remove: []string{"draft"}}
	return c
}

// manyTags is n tags k00, k01, … with value v.
func manyTags(n int, v string) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[fmt.Sprintf("k%02d", i)] = v
	}
	return out
}

// manyKeys is n keys k00, k01, ….
func manyKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%02d", i)
	}
	return out
}

// v3EncodeRejectCases are tag commands Encode rejects.
var v3EncodeRejectCases = []struct {
	name string
	c    func() Command
}{
	{"no body", func() Command { c := validTag(); c.Tag = nil; return c }},
	{"empty body", func() Command { c := validTag(); c.Tag = &Tag{}; return c }},
	{"empty set and remove", func() Command { c := validTag(); c.Tag = &Tag{Set: map[string]string{}, Remove: []string{}}; return c }},
	{"upper-case key", func() Command { c := validTag(); c.Tag.Set = map[string]string{"Env": "x"}; return c }},
	{"empty key", func() Command { c := validTag(); c.Tag.Set = map[string]string{"": "x"}; return c }},
	{"key with a space", func() Command { c := validTag(); c.Tag.Set = map[string]string{"a b": "x"}; return c }},
	{"key with a slash", func() Command { c := validTag(); c.Tag.Set = map[string]string{"a/b": "x"}; return c }},
	{"long key", func() Command { c := validTag(); c.Tag.Set = map[string]string{strings.Repeat("k", 65): "x"}; return c }},
	{"key with a newline", func() Command { c := validTag(); c.Tag.Set = map[string]string{"env\n": "x"}; return c }},
	{"long value", func() Command {
		c := validTag()
		c.Tag.Set = map[string]string{"env": strings.Repeat("v", 257)}
		return c
	}},
	{"value of 129 two-byte characters", func() Command {
		c := validTag()
		c.Tag.Set = map[string]string{"env": strings.Repeat("é", 129)}
		return c
	}},
	{"value not UTF-8", func() Command { c := validTag(); c.Tag.Set = map[string]string{"env": "\xff"}; return c }},
	{"17 tags", func() Command { c := validTag(); c.Tag.Set = manyTags(17, "v"); return c }},
	{"17 removed", func() Command { c := validTag(); c.Tag.Set, c.Tag.Remove = nil, manyKeys(17); return c }},
	{"removed twice", func() Command { c := validTag(); c.Tag.Remove = []string{"a", "b", "a"}; return c }},
	{"removed bad key", func() Command { c := validTag(); c.Tag.Remove = []string{"A"}; return c }},
	{"removed empty key", func() Command { c := validTag(); c.Tag.Remove = []string{""}; return c }},
	{"set and removed", func() Command { c := validTag(); c.Tag.Remove = []string{"draft", "env"}; return c }},
	{"tag body on a delivery", func() Command { c := validDeliver(); c.Tag = validTag().Tag; return c }},
	{"tag with a delivery body", func() Command { c := validTag(); c.Deliver = validDeliver().Deliver; return c }},
}

func TestV3EncodeRejects(t *testing.T) {
	for _, tt := range v3EncodeRejectCases {
		for _, v := range []int{3, CurrentVersion} {
			_, err := Encode(Capability{V: v}, tt.c())
			var we *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &we) || we.Version != v {
				t.Errorf("%s: err = %v, want ErrInvalid as *Error of v%d", tt.name, err, v)
			}
		}
	}
	for name, change := range map[string]func(*Tag){
		"as built":        func(*Tag) {},
		"set only":        func(t *Tag) { t.Remove = nil },
		"remove only":     func(t *Tag) { t.Set = nil },
		"empty value":     func(t *Tag) { t.Set["note"] = "" },
		"longest value":   func(t *Tag) { t.Set["env"] = strings.Repeat("é", MaxTagValueBytes/2) },
		"longest key":     func(t *Tag) { t.Set[strings.Repeat("k", MaxTagKeyBytes)] = "x" },
		"every key char":  func(t *Tag) { t.Set["az09_.-"] = "x" },
		"MaxTags tags":    func(t *Tag) { t.Set = manyTags(MaxTags, "v") },
		"MaxTags removed": func(t *Tag) { t.Set, t.Remove = nil, manyKeys(MaxTags) },
		"empty remove":    func(t *Tag) { t.Remove = []string{} },
	} {
		c := validTag()
		change(c.Tag)
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

// v3DecodeRejectCases are version-3 payloads Decode rejects (also part of
// the corpus of TestSchemaAgreement).
var v3DecodeRejectCases = func() []struct{ name, in string } {
	const env = `"id":"c1","acceptedDeploymentId":"dep-1","acceptedAt":"2026-01-01T00:00:00Z"`
	tag := func(body string) string { return `{"v":3,"kind":"tag",` + env + `,"tag":` + body + `}` }
	return []struct{ name, in string }{
		{"no body", `{"v":3,"kind":"tag",` + env + `}`},
		{"body null", tag(`null`)},
		{"empty body", tag(`{}`)},
		{"set null", tag(`{"set":null,"remove":["a"]}`)},
		{"remove null", tag(`{"set":{"a":"b"},"remove":null}`)},
		{"empty set", tag(`{"set":{}}`)},
		{"empty set beside remove", tag(`{"set":{},"remove":["a"]}`)},
		{"empty remove beside set", tag(`{"set":{"a":"b"},"remove":[]}`)},
		{"set not an object", tag(`{"set":["a"]}`)},
		{"remove not an array", tag(`{"remove":"a"}`)},
		{"value null", tag(`{"set":{"a":null}}`)},
		{"value number", tag(`{"set":{"a":1}}`)},
		{"upper-case key", tag(`{"set":{"A":"b"}}`)},
		{"empty key", tag(`{"set":{"":"b"}}`)},
		{"long key", tag(`{"set":{"` + strings.Repeat("k", 65) + `":"b"}}`)},
		{"long value", tag(`{"set":{"a":"` + strings.Repeat("v", 257) + `"}}`)},
		{"value of 129 two-byte characters", tag(`{"set":{"a":"` + strings.Repeat("é", 129) + `"}}`)},
		{"value of 200 two-byte characters", tag(`{"set":{"a":"` + strings.Repeat("é", 200) + `"}}`)},
		{"17 tags", tag(`{"set":{` + jsonTags(17) + `}}`)},
		{"17 removed", tag(`{"remove":["` + strings.Join(manyKeys(17), `","`) + `"]}`)},
		{"removed twice", tag(`{"remove":["a","b","a"]}`)},
		{"removed number", tag(`{"remove":[1]}`)},
		{"removed bad key", tag(`{"remove":["a b"]}`)},
		{"set and removed", tag(`{"set":{"a":"b"},"remove":["a"]}`)},
		{"unknown member", tag(`{"set":{"a":"b"},"merge":true}`)},
		{"case-folded member", tag(`{"Set":{"a":"b"}}`)},
		{"repeated key", tag(`{"set":{"a":"b","a":"c"},"remove":["a"]}`)},
		{"tag body on a cancel", `{"v":3,"kind":"cancel",` + env + `,"tag":{"set":{"a":"b"}}}`},
		{"tag with a move body", `{"v":3,"kind":"tag",` + env + `,"move":{"deploymentId":"d"}}`},
		{"v2 tag", `{"v":2,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}}}`},
		{"v2 tag member", `{"v":2,"kind":"cancel",` + env + `,"tag":{"set":{"a":"b"}}}`},
		{"v1 tag", `{"v":1,"kind":"tag",` + env + `,"tag":{"set":{"a":"b"}}}`},
	}
}()

// jsonTags is the members of n tags k00, k01, … (value "v").
func jsonTags(n int) string {
	parts := make([]string, n)
	for i, k := range manyKeys(n) {
		parts[i] = `"` + k + `":"v"`
	}
	return strings.Join(parts, ",")
}

func TestV3DecodeRejects(t *testing.T) {
	for _, tt := range v3DecodeRejectCases {
		_, err := Decode([]byte(tt.in))
		var we *Error
		if err == nil || !errors.As(err, &we) {
			t.Errorf("%s: err = %v, want a *Error", tt.name, err)
		}
	}
}

// TestDecodeInputV3: the owner's view of a tag command carries its body.
func TestDecodeInputV3(t *testing.T) {
	const dep = "dep-2026-03-01"
	want := map[string]TurnInput{
		"tag": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0R", Kind: KindTag, Caller: "admin:ops", Tag: &Tag{
			Set:    map[string]string{"env": "prod", "note": "", "owner": "Zoë", "team.search": "retrieval-v2"},
			Remove: []string{"draft"}}},
		"tag-remove": {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0S", Kind: KindTag, Caller: "admin:ops",
			Tag: &Tag{Remove: []string{"env", "team.search"}}},
	}
	for name, w := range want {
		got := DecodeInput(9, readFile(t, "testdata/v3/"+name+".json"))
		w.Seq, w.Deployment = 9, dep
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
	// The view does not share the command's body.
	c := validTag()
	in := c.Input(1)
	in.Tag.Set["env"] = "changed"
	if c.Tag.Set["env"] != "prod" {
		t.Error("Input shares the command's tags")
	}
}
