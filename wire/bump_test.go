package wire

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// A throw-away version 4, built only in this test, proves the bump
// procedure of docs/wire.md on top of the shipped registry: a new field, a
// one-step 3→4 migration, every v0, v1, v2 and v3 fixture decoding to v4,
// v4 decoding, v5 rejected, and a producer serving a v1, a v2, a v3 and a
// v4 consumer side by side.

// commandV4 is version 3 plus a required envelope field "priority".
type commandV4 struct {
	Command
	Priority string `json:"priority"`
}

// migrateThrowawayV3 is the pure 3→4 transform: stamp v4, default the new
// field.
func migrateThrowawayV3(doc map[string]any) (map[string]any, error) {
	out := maps.Clone(doc)
	out["v"] = json.Number("4")
	out["priority"] = "normal"
	return out, nil
}

func registryV4(t *testing.T) *Registry {
	t.Helper()
	r := DefaultRegistry()
	if err := r.Register(4, migrateThrowawayV3); err != nil {
		t.Fatal(err)
	}
	if r.Current() != 4 || !reflect.DeepEqual(r.Versions(), []int{1, 2, 3, 4}) {
		t.Fatalf("versions %v", r.Versions())
	}
	return r
}

// decodeV4 is what the v4 build's Decode would be: lift, then strict decode.
func decodeV4(t *testing.T, r *Registry, b []byte) (commandV4, int, error) {
	t.Helper()
	doc, from, err := r.Upgrade(b)
	if err != nil {
		return commandV4{}, from, err
	}
	raw, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var c commandV4
	if err := unmarshalStrict(raw, &c); err != nil {
		t.Fatalf("lifted document does not fit the v4 shape: %v\n%s", err, raw)
	}
	return c, from, nil
}

func TestBumpToV4(t *testing.T) {
	r := registryV4(t)
	for v := 0; v <= CurrentVersion; v++ {
		for _, path := range fixtures(t, v) {
			raw := readFile(t, path)
			got, from, err := decodeV4(t, r, raw)
			if err != nil || from != v {
				t.Fatalf("%s: from %d, err %v", path, from, err)
			}
			want, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			got.Command = normalizeCommand(got.Command)
			if got.V != 4 || got.Priority != "normal" {
				t.Fatalf("%s: lifted to v%d priority %q", path, got.V, got.Priority)
			}
			got.V = want.V
			if !sameJSON(t, got.Command, want) {
				t.Fatalf("%s: v4 value differs from the shipped decode:\n got %+v\nwant %+v", path, got.Command, want)
			}
		}
	}
}

func TestBumpV4DecodesAndV5IsRejected(t *testing.T) {
	r := registryV4(t)
	v4 := commandV4{Command: validDeliver(), Priority: "high"}
	v4.V = 4
	v4.AcceptedAt = v4.AcceptedAt.UTC()
	b, err := marshal(v4)
	if err != nil {
		t.Fatal(err)
	}
	got, from, err := decodeV4(t, r, b)
	if err != nil || from != 4 || got.Priority != "high" || got.ID != v4.ID {
		t.Fatalf("v4 payload: %+v from %d err %v", got, from, err)
	}
	// The shipped build (current version 3) refuses the v4 payload loudly.
	if _, err := Decode(b); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("shipped Decode of v4: err = %v, want ErrUnknownVersion", err)
	}
	v5 := migrateStamp(t, b, "5")
	if _, _, err := r.Upgrade(v5); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v5: err = %v, want ErrUnknownVersion", err)
	}
}

// A v4 producer keeps the shipped encoders (v3, and v2 and v1 as
// down-conversions of it), so consumers stamped {v:1}, {v:2}, {v:3} and
// {v:4} are served side by side.
func TestBumpEncodesPerCapability(t *testing.T) {
	encodersV4 := map[int]func(commandV4) ([]byte, error){
		1: func(c commandV4) ([]byte, error) { return Encode(Capability{V: 1}, c.Command) },
		2: func(c commandV4) ([]byte, error) { return Encode(Capability{V: 2}, c.Command) },
		3: func(c commandV4) ([]byte, error) { return Encode(Capability{V: 3}, c.Command) },
		4: func(c commandV4) ([]byte, error) { c.V = 4; c.Command = normalizeCommand(c.Command); return marshal(c) },
	}
	c := commandV4{Command: validDeliver(), Priority: "high"}
	r := registryV4(t)
	for _, v := range slices.Sorted(maps.Keys(encodersV4)) {
		b, err := encodersV4[v](c)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parseObject(b)
		if got, _ := versionOf(doc); got != v {
			t.Fatalf("encoded for v%d declares v%d", v, got)
		}
		if _, _, err := decodeV4(t, r, b); err != nil {
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
