package wire

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// A throw-away version 6, built only in this test, proves the bump
// procedure of docs/wire.md on top of the shipped registry: a new field, a
// one-step 5→6 migration, every v0 to v5 fixture decoding to v6, v6
// decoding, v7 rejected, and a producer serving a v1, a v2, a v3, a v4, a
// v5 and a v6 consumer side by side.

// commandV6 is version 5 plus a required envelope field "priority".
type commandV6 struct {
	Command
	Priority string `json:"priority"`
}

// migrateThrowawayV5 is the pure 5→6 transform: stamp v6, default the new
// field.
func migrateThrowawayV5(doc map[string]any) (map[string]any, error) {
	out := maps.Clone(doc)
	out["v"] = json.Number("6")
	out["priority"] = "normal"
	return out, nil
}

func registryV6(t *testing.T) *Registry {
	t.Helper()
	r := DefaultRegistry()
	if err := r.Register(6, migrateThrowawayV5); err != nil {
		t.Fatal(err)
	}
	if r.Current() != 6 || !reflect.DeepEqual(r.Versions(), []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("versions %v", r.Versions())
	}
	return r
}

// decodeV6 is what the v6 build's Decode would be: lift, then strict decode.
func decodeV6(t *testing.T, r *Registry, b []byte) (commandV6, int, error) {
	t.Helper()
	doc, from, err := r.Upgrade(b)
	if err != nil {
		return commandV6{}, from, err
	}
	raw, err := marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var c commandV6
	if err := unmarshalStrict(raw, &c); err != nil {
		t.Fatalf("lifted document does not fit the v6 shape: %v\n%s", err, raw)
	}
	return c, from, nil
}

func TestBumpToV6(t *testing.T) {
	r := registryV6(t)
	for v := 0; v <= CurrentVersion; v++ {
		for _, path := range fixtures(t, v) {
			raw := readFile(t, path)
			got, from, err := decodeV6(t, r, raw)
			if err != nil || from != v {
				t.Fatalf("%s: from %d, err %v", path, from, err)
			}
			want, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			got.Command = normalizeCommand(got.Command)
			if got.V != 6 || got.Priority != "normal" {
				t.Fatalf("%s: lifted to v%d priority %q", path, got.V, got.Priority)
			}
			got.V = want.V
			if !sameJSON(t, got.Command, want) {
				t.Fatalf("%s: v6 value differs from the shipped decode:\n got %+v\nwant %+v", path, got.Command, want)
			}
		}
	}
}

func TestBumpV6DecodesAndV7IsRejected(t *testing.T) {
	r := registryV6(t)
	v6 := commandV6{Command: validDeliver(), Priority: "high"}
	v6.V = 6
	v6.AcceptedAt = v6.AcceptedAt.UTC()
	b, err := marshal(v6)
	if err != nil {
		t.Fatal(err)
	}
	got, from, err := decodeV6(t, r, b)
	if err != nil || from != 6 || got.Priority != "high" || got.ID != v6.ID {
		t.Fatalf("v6 payload: %+v from %d err %v", got, from, err)
	}
	// The shipped build (current version 5) refuses the v6 payload loudly.
	if _, err := Decode(b); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("shipped Decode of v6: err = %v, want ErrUnknownVersion", err)
	}
	v7 := migrateStamp(t, b, "7")
	if _, _, err := r.Upgrade(v7); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v7: err = %v, want ErrUnknownVersion", err)
	}
}

// A v6 producer keeps the shipped encoders (v5, and v4, v3, v2 and v1 as
// down-conversions of it), so consumers stamped {v:1} to {v:6} are served
// side by side.
func TestBumpEncodesPerCapability(t *testing.T) {
	encodersV6 := map[int]func(commandV6) ([]byte, error){
		6: func(c commandV6) ([]byte, error) { c.V = 6; c.Command = normalizeCommand(c.Command); return marshal(c) },
	}
	for v := 1; v <= CurrentVersion; v++ {
		encodersV6[v] = func(c commandV6) ([]byte, error) { return Encode(Capability{V: v}, c.Command) }
	}
	c := commandV6{Command: validDeliver(), Priority: "high"}
	r := registryV6(t)
	for _, v := range slices.Sorted(maps.Keys(encodersV6)) {
		b, err := encodersV6[v](c)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parseObject(b)
		if got, _ := versionOf(doc); got != v {
			t.Fatalf("encoded for v%d declares v%d", v, got)
		}
		if _, _, err := decodeV6(t, r, b); err != nil {
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
