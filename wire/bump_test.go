package wire

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"testing"
)

// A throw-away version 2, built only in this test, proves the bump
// procedure of docs/wire.md: a new field, a one-step 1→2 migration, every
// v0 and v1 fixture decoding to v2, v2 decoding, v3 rejected, and a
// producer serving a v1 and a v2 consumer side by side.

// commandV2 is version 1 plus a required envelope field "priority".
type commandV2 struct {
	Command
	Priority string `json:"priority"`
}

// migrateV1 is the pure 1→2 transform: stamp v2, default the new field.
func migrateV1(doc map[string]any) (map[string]any, error) {
	out := maps.Clone(doc)
	out["v"] = json.Number("2")
	out["priority"] = "normal"
	return out, nil
}

func registryV2(t *testing.T) *Registry {
	t.Helper()
	r := DefaultRegistry()
	if err := r.Register(2, migrateV1); err != nil {
		t.Fatal(err)
	}
	if r.Current() != 2 || !reflect.DeepEqual(r.Versions(), []int{1, 2}) {
		t.Fatalf("versions %v", r.Versions())
	}
	return r
}

// decodeV2 is what the v2 build's Decode would be: lift, then strict decode.
func decodeV2(t *testing.T, r *Registry, b []byte) (commandV2, int, error) {
	t.Helper()
	doc, from, err := r.Upgrade(b)
	if err != nil {
		return commandV2{}, from, err
	}
	raw, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var c commandV2
	if err := unmarshalStrict(raw, &c); err != nil {
		t.Fatalf("lifted document does not fit the v2 shape: %v\n%s", err, raw)
	}
	return c, from, nil
}

func TestBumpToV2(t *testing.T) {
	r := registryV2(t)
	for v := 0; v <= CurrentVersion; v++ {
		for _, path := range fixtures(t, v) {
			raw := readFile(t, path)
			got, from, err := decodeV2(t, r, raw)
			if err != nil || from != v {
				t.Fatalf("%s: from %d, err %v", path, from, err)
			}
			want, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			got.Command = normalizeCommand(got.Command)
			if got.V != 2 || got.Priority != "normal" {
				t.Fatalf("%s: lifted to v%d priority %q", path, got.V, got.Priority)
			}
			got.V = want.V
			if !sameJSON(t, got.Command, want) {
				t.Fatalf("%s: v2 value differs from v1 decode:\n got %+v\nwant %+v", path, got.Command, want)
			}
		}
	}
}

func TestBumpV2DecodesAndV3IsRejected(t *testing.T) {
	r := registryV2(t)
	v2 := commandV2{Command: validDeliver(), Priority: "high"}
	v2.V = 2
	v2.AcceptedAt = v2.AcceptedAt.UTC()
	b, err := marshal(v2)
	if err != nil {
		t.Fatal(err)
	}
	got, from, err := decodeV2(t, r, b)
	if err != nil || from != 2 || got.Priority != "high" || got.ID != v2.ID {
		t.Fatalf("v2 payload: %+v from %d err %v", got, from, err)
	}
	// The shipped build (current version 1) refuses the v2 payload loudly.
	if _, err := Decode(b); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("shipped Decode of v2: err = %v, want ErrUnknownVersion", err)
	}
	v3 := migrateStamp(t, b, "3")
	if _, _, err := r.Upgrade(v3); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v3: err = %v, want ErrUnknownVersion", err)
	}
}

// A v2 producer keeps the v1 encoder as a down-conversion, so a consumer
// stamped {v:1} and one stamped {v:2} are served side by side.
func TestBumpEncodesPerCapability(t *testing.T) {
	encodersV2 := map[int]func(commandV2) ([]byte, error){
		1: func(c commandV2) ([]byte, error) { return Encode(Capability{V: 1}, c.Command) },
		2: func(c commandV2) ([]byte, error) { c.V = 2; c.Command = normalizeCommand(c.Command); return marshal(c) },
	}
	c := commandV2{Command: validDeliver(), Priority: "high"}
	r := registryV2(t)
	for _, target := range []Capability{{V: 1}, {V: 2}} {
		b, err := encodersV2[target.V](c)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parseObject(b)
		if v, _ := versionOf(doc); v != target.V {
			t.Fatalf("encoded for %v declares v%d", target, v)
		}
		if _, _, err := decodeV2(t, r, b); err != nil {
			t.Fatal(err)
		}
	}
}

func migrateStamp(t *testing.T, b []byte, v string) []byte {
	t.Helper()
	doc, err := parseObject(b)
	if err != nil {
		t.Fatal(err)
	}
	doc["v"] = json.Number(v)
	out, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON compares two values by their JSON meaning: a migrated document
// is re-marshaled from its generic form, which may reorder object keys
// inside raw JSON fields.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	var docs [2]any
	for i, v := range []any{a, b} {
		raw, err := marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if docs[i], err = parseDoc(raw); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(docs[0], docs[1])
}
