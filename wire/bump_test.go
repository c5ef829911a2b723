package wire

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// A throw-away version 3, built only in this test, proves the bump
// procedure of docs/wire.md on top of the shipped registry: a new field, a
// one-step 2→3 migration, every v0, v1 and v2 fixture decoding to v3, v3
// decoding, v4 rejected, and a producer serving a v1, a v2 and a v3
// consumer side by side.

// commandV3 is version 2 plus a required envelope field "priority".
type commandV3 struct {
	Command
	Priority string `json:"priority"`
}

// migrateThrowawayV2 is the pure 2→3 transform: stamp v3, default the new
// field.
func migrateThrowawayV2(doc map[string]any) (map[string]any, error) {
	out := maps.Clone(doc)
	out["v"] = json.Number("3")
	out["priority"] = "normal"
	return out, nil
}

func registryV3(t *testing.T) *Registry {
	t.Helper()
	r := DefaultRegistry()
	if err := r.Register(3, migrateThrowawayV2); err != nil {
		t.Fatal(err)
	}
	if r.Current() != 3 || !reflect.DeepEqual(r.Versions(), []int{1, 2, 3}) {
		t.Fatalf("versions %v", r.Versions())
	}
	return r
}

// decodeV3 is what the v3 build's Decode would be: lift, then strict decode.
func decodeV3(t *testing.T, r *Registry, b []byte) (commandV3, int, error) {
	t.Helper()
	doc, from, err := r.Upgrade(b)
	if err != nil {
		return commandV3{}, from, err
	}
	raw, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var c commandV3
	if err := unmarshalStrict(raw, &c); err != nil {
		t.Fatalf("lifted document does not fit the v3 shape: %v\n%s", err, raw)
	}
	return c, from, nil
}

func TestBumpToV3(t *testing.T) {
	r := registryV3(t)
	for v := 0; v <= CurrentVersion; v++ {
		for _, path := range fixtures(t, v) {
			raw := readFile(t, path)
			got, from, err := decodeV3(t, r, raw)
			if err != nil || from != v {
				t.Fatalf("%s: from %d, err %v", path, from, err)
			}
			want, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			got.Command = normalizeCommand(got.Command)
			if got.V != 3 || got.Priority != "normal" {
				t.Fatalf("%s: lifted to v%d priority %q", path, got.V, got.Priority)
			}
			got.V = want.V
			if !sameJSON(t, got.Command, want) {
				t.Fatalf("%s: v3 value differs from the shipped decode:\n got %+v\nwant %+v", path, got.Command, want)
			}
		}
	}
}

func TestBumpV3DecodesAndV4IsRejected(t *testing.T) {
	r := registryV3(t)
	v3 := commandV3{Command: validDeliver(), Priority: "high"}
	v3.V = 3
	v3.AcceptedAt = v3.AcceptedAt.UTC()
	b, err := marshal(v3)
	if err != nil {
		t.Fatal(err)
	}
	got, from, err := decodeV3(t, r, b)
	if err != nil || from != 3 || got.Priority != "high" || got.ID != v3.ID {
		t.Fatalf("v3 payload: %+v from %d err %v", got, from, err)
	}
	// The shipped build (current version 2) refuses the v3 payload loudly.
	if _, err := Decode(b); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("shipped Decode of v3: err = %v, want ErrUnknownVersion", err)
	}
	v4 := migrateStamp(t, b, "4")
	if _, _, err := r.Upgrade(v4); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v4: err = %v, want ErrUnknownVersion", err)
	}
}

// A v3 producer keeps the shipped encoders (v2, and v1 as a
// down-conversion of it), so consumers stamped {v:1}, {v:2} and {v:3} are
// served side by side.
func TestBumpEncodesPerCapability(t *testing.T) {
	encodersV3 := map[int]func(commandV3) ([]byte, error){
		1: func(c commandV3) ([]byte, error) { return Encode(Capability{V: 1}, c.Command) },
		2: func(c commandV3) ([]byte, error) { return Encode(Capability{V: 2}, c.Command) },
		3: func(c commandV3) ([]byte, error) { c.V = 3; c.Command = normalizeCommand(c.Command); return marshal(c) },
	}
	c := commandV3{Command: validDeliver(), Priority: "high"}
	r := registryV3(t)
	for _, v := range slices.Sorted(maps.Keys(encodersV3)) {
		b, err := encodersV3[v](c)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parseObject(b)
		if got, _ := versionOf(doc); got != v {
			t.Fatalf("encoded for v%d declares v%d", v, got)
		}
		if _, _, err := decodeV3(t, r, b); err != nil {
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
