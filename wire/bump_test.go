package wire

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// A throw-away version 5, built only in this test, proves the bump
// procedure of docs/wire.md on top of the shipped registry: a new field, a
// one-step 4→5 migration, every v0, v1, v2, v3 and v4 fixture decoding to
// v5, v5 decoding, v6 rejected, and a producer serving a v1, a v2, a v3, a
// v4 and a v5 consumer side by side.

// commandV5 is version 4 plus a required envelope field "priority".
type commandV5 struct {
	Command
	Priority string `json:"priority"`
}

// migrateThrowawayV4 is the pure 4→5 transform: stamp v5, default the new
// field.
func migrateThrowawayV4(doc map[string]any) (map[string]any, error) {
	out := maps.Clone(doc)
	out["v"] = json.Number("5")
	out["priority"] = "normal"
	return out, nil
}

func registryV5(t *testing.T) *Registry {
	t.Helper()
	r := DefaultRegistry()
	if err := r.Register(5, migrateThrowawayV4); err != nil {
		t.Fatal(err)
	}
	if r.Current() != 5 || !reflect.DeepEqual(r.Versions(), []int{1, 2, 3, 4, 5}) {
		t.Fatalf("versions %v", r.Versions())
	}
	return r
}

// decodeV5 is what the v5 build's Decode would be: lift, then strict decode.
func decodeV5(t *testing.T, r *Registry, b []byte) (commandV5, int, error) {
	t.Helper()
	doc, from, err := r.Upgrade(b)
	if err != nil {
		return commandV5{}, from, err
	}
	raw, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var c commandV5
	if err := unmarshalStrict(raw, &c); err != nil {
		t.Fatalf("lifted document does not fit the v5 shape: %v\n%s", err, raw)
	}
	return c, from, nil
}

func TestBumpToV5(t *testing.T) {
	r := registryV5(t)
	for v := 0; v <= CurrentVersion; v++ {
		for _, path := range fixtures(t, v) {
			raw := readFile(t, path)
			got, from, err := decodeV5(t, r, raw)
			if err != nil || from != v {
				t.Fatalf("%s: from %d, err %v", path, from, err)
			}
			want, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			got.Command = normalizeCommand(got.Command)
			if got.V != 5 || got.Priority != "normal" {
				t.Fatalf("%s: lifted to v%d priority %q", path, got.V, got.Priority)
			}
			got.V = want.V
			if !sameJSON(t, got.Command, want) {
				t.Fatalf("%s: v5 value differs from the shipped decode:\n got %+v\nwant %+v", path, got.Command, want)
			}
		}
	}
}

func TestBumpV5DecodesAndV6IsRejected(t *testing.T) {
	r := registryV5(t)
	v5 := commandV5{Command: validDeliver(), Priority: "high"}
	v5.V = 5
	v5.AcceptedAt = v5.AcceptedAt.UTC()
	b, err := marshal(v5)
	if err != nil {
		t.Fatal(err)
	}
	got, from, err := decodeV5(t, r, b)
	if err != nil || from != 5 || got.Priority != "high" || got.ID != v5.ID {
		t.Fatalf("v5 payload: %+v from %d err %v", got, from, err)
	}
	// The shipped build (current version 4) refuses the v5 payload loudly.
	if _, err := Decode(b); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("shipped Decode of v5: err = %v, want ErrUnknownVersion", err)
	}
	v6 := migrateStamp(t, b, "6")
	if _, _, err := r.Upgrade(v6); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v6: err = %v, want ErrUnknownVersion", err)
	}
}

// A v5 producer keeps the shipped encoders (v4, and v3, v2 and v1 as
// down-conversions of it), so consumers stamped {v:1}, {v:2}, {v:3},
// {v:4} and {v:5} are served side by side.
func TestBumpEncodesPerCapability(t *testing.T) {
	encodersV5 := map[int]func(commandV5) ([]byte, error){
		1: func(c commandV5) ([]byte, error) { return Encode(Capability{V: 1}, c.Command) },
		2: func(c commandV5) ([]byte, error) { return Encode(Capability{V: 2}, c.Command) },
		3: func(c commandV5) ([]byte, error) { return Encode(Capability{V: 3}, c.Command) },
		4: func(c commandV5) ([]byte, error) { return Encode(Capability{V: 4}, c.Command) },
		5: func(c commandV5) ([]byte, error) { c.V = 5; c.Command = normalizeCommand(c.Command); return marshal(c) },
	}
	c := commandV5{Command: validDeliver(), Priority: "high"}
	r := registryV5(t)
	for _, v := range slices.Sorted(maps.Keys(encodersV5)) {
		b, err := encodersV5[v](c)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parseObject(b)
		if got, _ := versionOf(doc); got != v {
			t.Fatalf("encoded for v%d declares v%d", v, got)
		}
		if _, _, err := decodeV5(t, r, b); err != nil {
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
