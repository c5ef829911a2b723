package kv

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// A session's children without its checkpoint (docs/kv-records.md, "Hook"):
// every child is created under the alias child.<parent>.<handle>.<g>
// (wire.ChildAlias), whose hook is written create-only with the child's
// record, and re-created by every boot of the child from its checkpoint's
// aliases (a hook a crash left unwritten). The alias hooks are so a
// derived parent → child index that every build has kept, with nothing
// new written. The token encoding escapes the alias's dots (one subject
// token, child=2E<parent>=2E…), so no subject filter selects one parent's
// children: Children lists every hook key and keeps the parent's. That
// costs one key per address in the fleet, on a path taken only to end a
// session whose checkpoint cannot be decoded (the orphan sweep lists every
// session record the same way, periodically).

// Child is one child of a session as its alias hook names it.
type Child struct {
	SessionID  string
	Handle     string
	Generation int
	// Ended: the hook is a tombstone (the child ended).
	Ended bool
}

// Children lists the children of session parentID by their alias hooks,
// ordered by handle and generation. A hook that vanished meanwhile is
// left out.
func (s *Store) Children(ctx context.Context, parentID string) ([]Child, error) {
	if err := subjects.ValidateSessionID(parentID); err != nil {
		return nil, invalid("children of %q: %w", parentID, err)
	}
	pattern := subjects.HookKeys()
	l, err := s.hooks.kv.ListKeysFiltered(ctx, pattern)
	if err != nil {
		return nil, mapErr("list", pattern, err)
	}
	type alias struct {
		tok   string
		child Child
	}
	var found []alias
	for key := range l.Keys() {
		if tok, c, ok := childKey(key, parentID); ok {
			found = append(found, alias{tok, c})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Child
	for _, a := range found {
		h, _, err := s.GetHook(ctx, a.tok)
		switch {
		case errors.Is(err, record.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		c := a.child
		c.SessionID, c.Ended = h.SessionID, h.Tombstone
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Child) int {
		return cmp.Or(cmp.Compare(a.Handle, b.Handle), cmp.Compare(a.Generation, b.Generation))
	})
	return out, nil
}

// childKey is the token of hook key and the handle and generation it
// names when it is the alias of one of parentID's children.
func childKey(key, parentID string) (string, Child, bool) {
	tok, err := subjects.ParseHookKey(key)
	if err != nil {
		return "", Child{}, false
	}
	alias, err := subjects.DecodeToken(tok)
	if err != nil {
		return "", Child{}, false
	}
	p, handle, g, ok := wire.ParseChildAlias(alias)
	return tok, Child{Handle: handle, Generation: g}, ok && p == parentID
}
