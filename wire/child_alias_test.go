package wire

import "testing"

// ParseChildAlias inverts ChildAlias and refuses every other address.
func TestParseChildAlias(t *testing.T) {
	p, h, g, ok := ParseChildAlias(ChildAlias("01PARENT", "re_search-2", 12))
	if !ok || p != "01PARENT" || h != "re_search-2" || g != 12 {
		t.Fatalf("parsed %q %q %d %v", p, h, g, ok)
	}
	for _, a := range []string{"", "child", "child.p.h", "child.p.h.0", "child.p.h.01", "child.p.h.x", "child..h.1",
		"child.p..1", "kid.p.h.1", "child.p.h.1.2", "C123.456"} {
		if _, _, _, ok := ParseChildAlias(a); ok {
			t.Errorf("%q parsed as a child alias", a)
		}
	}
}
