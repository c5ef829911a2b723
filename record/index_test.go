package record_test

import (
	"maps"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// TestDeriveIndexTags: an entry carries its checkpoint's tags (a copy),
// and a change of tags is a change of the entry (Same is false), so the
// owner writes it.
func TestDeriveIndexTags(t *testing.T) {
	rec := record.SessionRecord{SessionID: "s1", DeploymentID: "v1", State: record.StateActive, Epoch: 3}
	cp := wire.Checkpoint{SessionID: "s1", Tokens: []string{"s1", "a.b"}, Tags: map[string]string{"tenant": "acme"}}
	e := record.DeriveIndex(rec, 7, cp, "default")
	if !maps.Equal(e.Tags, map[string]string{"tenant": "acme"}) || e.Revision != 7 || e.Epoch != 3 || e.Aliases[0] != "a.b" {
		t.Fatalf("entry %+v", e)
	}
	cp.Tags["tenant"] = "changed"
	if e.Tags["tenant"] != "acme" {
		t.Fatal("the entry shares the checkpoint's tag map")
	}
	f := record.DeriveIndex(rec, 7, cp, "default")
	if e.Same(f) {
		t.Fatal("entries with other tags are the same")
	}
	cp.Tags = nil
	if g := record.DeriveIndex(rec, 7, cp, "default"); g.Tags != nil || e.Same(g) {
		t.Fatalf("untagged entry %+v", g)
	}
}
