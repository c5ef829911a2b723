package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	pkgs := func(doc string, imports ...string) []Package {
		return []Package{
			{Rel: "record", Name: "record", Doc: doc, Imports: imports},
			{Rel: "subjects", Name: "subjects"}, {Rel: "wire", Name: "wire"}, {Rel: "kv", Name: "kv"},
			{Rel: "runtime/session", Name: "session"},
		}
	}
	for _, tc := range []struct {
		name    string
		doc     string
		imports []string
		want    []string // substrings of the complaints, in order; none: true
	}{
		{"true only", "Package record stores. record imports only subjects and wire.", []string{"subjects", "wire"}, nil},
		{"stale only", "record imports only subjects (the idle rule).", []string{"subjects", "wire"}, []string{"also imports wire"}},
		{"named, not imported", "The package imports subjects and kv.", []string{"subjects"}, []string{"does not import kv"}},
		{"leaf", "It is a leaf: it imports the standard library only.", []string{"wire"}, []string{"also imports wire"}},
		{"true leaf", "It is a leaf: it imports the standard library only.", nil, nil},
		{"never", "record never imports kv: it declares Store, and imports subjects only.", []string{"kv", "subjects"},
			[]string{"but it imports kv", "also imports kv"}},
		{"imports no", "It imports no kv and reads nothing.", []string{"kv"}, []string{"but it imports kv"}},
		{"another subject", "The ingress imports kv and runtime/session.", nil, nil},
		{"a parenthetical is no claim", "It imports wire only (deps.sh allows subjects).", []string{"wire"}, nil},
		{"a quotation is no claim", `The check reads claims like "record imports kv".`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Check(pkgs(tc.doc, tc.imports...))
			if len(got) != len(tc.want) {
				t.Fatalf("complaints %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Fatalf("complaint %q, want it to say %q", got[i], w)
				}
			}
		})
	}
}

// The module's own package docs hold no false claim about their imports.
func TestModule(t *testing.T) {
	t.Parallel()
	pkgs, err := Load("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("loaded %d packages", len(pkgs))
	}
	if bad := Check(pkgs); len(bad) > 0 {
		t.Fatalf("false claims:\n%s", strings.Join(bad, "\n"))
	}
}
