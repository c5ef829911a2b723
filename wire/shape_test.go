package wire

import "testing"

// refusesEmpty reads a jsonschema tag as the generated schema states it:
// "" is refused by a minLength of at least 1, or by an enumeration without
// "".
func TestRefusesEmpty(t *testing.T) {
	for tag, want := range map[string]bool{
		"":                                     false,
		"minLength=1":                          true,
		"minLength=0":                          false,
		"maxLength=5":                          false,
		"minLength=1,maxLength=256":            true,
		"pattern=^[a-z]{1,64}$,minLength=2":    true,
		"enum=user,enum=admin":                 true,
		"enum=,enum=done":                      false,
		"enum=done,enum=":                      false,
		"pattern=^[A-Za-z0-9_-]+$,maxLength=8": false,
	} {
		if got := refusesEmpty(tag); got != want {
			t.Errorf("refusesEmpty(%q) = %v, want %v", tag, got, want)
		}
	}
}

// The typed path of a kind whose validation states its schema (a
// built-in's) declines a present empty string exactly where the schema
// refuses it, and accepts it where the schema allows it (the reference
// path decides either way: agreeEvent holds the two together).
func TestShapeEmptyOptionalStrings(t *testing.T) {
	type opt struct {
		A string `json:"a,omitempty" jsonschema:"enum=,enum=x"`
		B string `json:"b,omitempty" jsonschema:"minLength=2"`
		C string `json:"c,omitempty" jsonschema:"maxLength=3"`
		D string `json:"d,omitempty" jsonschema:"enum=x,enum=y"`
	}
	reg := NewEventRegistry()
	validate := func(d opt) error {
		return all(oneOf("a", d.A, "", "x"), oneOf("d", d.D, "", "x", "y"),
			map[bool]error{true: nil, false: ErrInvalid}[d.B == "" || len(d.B) >= 2],
			map[bool]error{true: nil, false: ErrInvalid}[len(d.C) <= 3])
	}
	if err := registerEvent(reg, "x.opt", 1, validate, true); err != nil || reg.spec("x.opt").shape == nil {
		t.Fatalf("registered without a shape: %v", err)
	}
	for data, want := range map[string]verdict{
		`{}`: accepted, `{"a":""}`: accepted, `{"c":""}`: accepted, `{"a":"x","b":"bb","d":"y"}`: accepted,
		`{"b":""}`: declined, `{"d":""}`: declined, `{"a":"z"}`: declined, `{"b":"b"}`: declined,
	} {
		b := rawEvent("x.opt", data)
		agreeEvent(t, []*EventRegistry{reg}, b)
		if got := eventVerdict(reg, b); got != want {
			t.Errorf("%s: typed path verdict %v, want %v", data, got, want)
		}
	}
}
