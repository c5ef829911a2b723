package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Session tags: set when a session is created (POST /v1/sessions, or the
// POST /v1/deliveries that creates it), changed by PATCH
// /v1/sessions/{id} — a tag command the owner applies at its next
// boundary — and shown by status (docs/api.md, "Tags").

// parseTags reads a creation's tags: an object of strings, checked by
// wire's rules (400 invalid_tags).
func parseTags(raw json.RawMessage) (map[string]string, error) {
	var tags map[string]*string
	if err := json.Unmarshal(raw, &tags); err != nil || tags == nil {
		return nil, invalidTags("tags must be an object of strings, such as {\"tenant\":\"acme\"}")
	}
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		if v == nil {
			return nil, invalidTags("tags[%q] is null (a new session's tags are strings; null removes a tag only in PATCH /v1/sessions/{id})", clip(k))
		}
		out[k] = *v
	}
	if err := wire.ValidateTags(out); err != nil {
		return nil, invalidTags("%v", tagReason(err))
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ParseTag parses PATCH /v1/sessions/{id}: {"tags": {key: value | null}}, a
// merge (null removes the key), or {"defaultMode", "defaultDebounce"}, the
// session's default busy mode (a configure command), plus the optional
// caller and idempotencyKey.
func ParseTag(b []byte, sessionID string, lim Limits) (Request, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Request{}, invalidTags("the body must be {\"tags\": {key: value | null}}")
	}
	r, v, err := parseSessionOp(b, sessionID, lim, tagKeys)
	if err != nil {
		return Request{}, err
	}
	if v.DefaultMode != nil || v.DefaultDebounce != nil { // the default mode: a configure command
		if v.Tags != nil {
			return Request{}, bad("give tags or defaultMode, not both (send two requests)")
		}
		c, err := parseConfigure(v.DefaultMode, v.DefaultDebounce)
		if err != nil {
			return Request{}, err
		}
		r.Kind, r.Configure = wire.KindConfigure, c
		return r, r.common(v)
	}
	if v.Tags == nil {
		return Request{}, invalidTags("tags is required: {\"tags\": {key: value | null}}")
	}
	var patch map[string]*string
	if err := json.Unmarshal(v.Tags, &patch); err != nil || patch == nil {
		return Request{}, invalidTags("tags must be an object whose values are strings or null")
	}
	if len(patch) == 0 {
		return Request{}, invalidTags("tags is empty: name at least one key to set or remove")
	}
	t := &wire.Tag{}
	for k, val := range patch {
		if val == nil {
			t.Remove = append(t.Remove, k)
			continue
		}
		if t.Set == nil {
			t.Set = map[string]string{}
		}
		t.Set[k] = *val
	}
	slices.Sort(t.Remove)
	if len(patch) > wire.MaxTags {
		return Request{}, invalidTags("%d keys, the limit is %d", len(patch), wire.MaxTags)
	}
	if err := t.Validate(); err != nil {
		return Request{}, invalidTags("%v", tagReason(err))
	}
	r.Kind, r.Tag = wire.KindTag, t
	return r, r.common(v)
}

// tagReason is the reason of a wire tag error, without wire's prefix.
func tagReason(err error) string {
	return strings.TrimPrefix(err.Error(), wire.ErrInvalid.Error()+": ")
}

func invalidTags(format string, args ...any) *Error {
	return &Error{Err: ErrBadRequest, Detail: CodeInvalidTags, Message: fmt.Sprintf(format, args...)}
}

// tagsUnsupported refuses tags sent to deployment dep, whose owners do
// not read them (why), before anything is written (nothing what).
func tagsUnsupported(dep, why, what string) *Error {
	return &Error{Err: ErrUnsupportedCommand, Detail: CodeTagsUnsupported, Message: fmt.Sprintf(
		"deployment %s %s; its owners would not keep tags, so nothing %s (upgrade it, or send no tags)", dep, why, what)}
}

// readsTags reports whether dep's owners read tags (they advertise inbox
// version wire.TagsVersion).
func (s *Server) readsTags(ctx context.Context, a *attached, dep string) (bool, []int, error) {
	return s.readsVersion(ctx, a, dep, wire.TagsVersion)
}

// readsVersion reports whether dep's owners advertise inbox version v, and
// the versions they advertise. The fleet view is a hint: a "no" is
// confirmed by the deployment record, read from the leader.
func (s *Server) readsVersion(ctx context.Context, a *attached, dep string, v int) (bool, []int, error) {
	vs := a.fleet.Reads(dep)
	if slices.Contains(vs, v) {
		return true, vs, nil
	}
	vs, err := a.store.DeploymentReads(ctx, dep)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return false, nil, nil
	case err != nil:
		return false, nil, fail(ErrUnavailable, "read deployment %s: %v", dep, err)
	}
	return slices.Contains(vs, v), vs, nil
}

// checkStartTags refuses a start with tags on a deployment whose owners
// do not read them: 422 tags_unsupported, nothing created.
func (s *Server) checkStartTags(ctx context.Context, a *attached, dep string, tags map[string]string) error {
	if len(tags) == 0 {
		return nil
	}
	ok, vs, err := s.readsTags(ctx, a, dep)
	switch {
	case err != nil:
		return err
	case !ok:
		return tagsUnsupported(dep, fmt.Sprintf("would start the session, and its owners read inbox versions %v; tags need version %d", orNone(vs), wire.TagsVersion), "was created")
	}
	return nil
}

func orNone(vs []int) any {
	if len(vs) == 0 {
		return "[1] (no advertisement)"
	}
	return vs
}

// checkTagMerge refuses a tag change that would leave the session more
// than wire.MaxTags tags (422 too_many_tags), as far as its last commit
// tells; the owner applies the same rule to the tags it holds when the
// command arrives, and refuses it there (command.rejected, reason
// too_many_tags) if a change in between made it too many.
func (s *Server) checkTagMerge(ctx context.Context, a *attached, id string, t *wire.Tag) error {
	cur, err := a.sessionRecord(ctx, id)
	if err != nil {
		return nil // the publish path reports what is wrong with the session
	}
	cp, readable, err := readCheckpoint(cur.Record)
	if err != nil || !readable {
		return nil
	}
	if _, err := wire.MergeTags(cp.Tags, *t); err != nil {
		return &Error{Err: ErrUnsupportedCommand, Detail: CodeTooManyTags, Message: fmt.Sprintf(
			"session %s has %d tags; this change would leave more than %d (remove some with null); nothing was changed", id, len(cp.Tags), wire.MaxTags)}
	}
	return nil
}
