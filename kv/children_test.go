package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Children lists a session's children by their alias hooks: each handle
// and generation with the child the hook names, an ended child's
// tombstone marked; another parent's children, a grandchild and other
// addresses (stable, an ordinary alias, a parent ID that extends this
// one) are not listed.
func testChildren(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	parent, other := uid("p"), uid("p")
	type kid struct {
		parent, handle string
		g              int
	}
	kids := []kid{{parent, "r2", 1}, {parent, "r1", 1}, {parent, "r1", 2}, {other, "r1", 1}, {parent + "x", "r1", 1},
		{wire.ChildSessionID(parent, "r1", 1), "g", 1}}
	hook := func(addr, session string) uint64 {
		rev, err := st.CreateHook(c, record.Hook{Token: token(t, addr), SessionID: session, WireV: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	hook(parent, parent)
	hook("C123."+parent, parent)
	for _, k := range kids {
		rev := hook(wire.ChildAlias(k.parent, k.handle, k.g), wire.ChildSessionID(k.parent, k.handle, k.g))
		if k.handle == "r1" && k.g == 1 && k.parent == parent {
			if _, err := st.Tombstone(c, token(t, wire.ChildAlias(parent, "r1", 1)), rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []kv.Child{
		{SessionID: wire.ChildSessionID(parent, "r1", 1), Handle: "r1", Generation: 1, Ended: true},
		{SessionID: wire.ChildSessionID(parent, "r1", 2), Handle: "r1", Generation: 2},
		{SessionID: wire.ChildSessionID(parent, "r2", 1), Handle: "r2", Generation: 1},
	}
	eventually(t, func() error {
		got, err := st.Children(c, parent)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("children of %s:\n got %+v\nwant %+v", parent, got, want)
		}
		return nil
	})
	if got, err := st.Children(c, uid("nobody")); err != nil || len(got) != 0 {
		t.Fatalf("children of a session without any: %+v %v", got, err)
	}
	if _, err := st.Children(c, "not.a.session"); err == nil {
		t.Fatal("children of an invalid session ID: no error")
	}
}
