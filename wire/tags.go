package wire

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	genschema "github.com/invopop/jsonschema"
)

// Session tags: a small map of operator- or client-chosen labels on a
// session. They cross three durable boundaries: the inbox (version 3,
// kind tag: a merge into the session's tags), the checkpoint (state
// version 7, tags) and the events (session.tagged, the resulting set).

// KindTag (inbox version 3) merges its body into the session's tags. The
// owner applies it at once, at its next boundary (it never waits in a
// turn, and a checkpoint never stores it); the ingress sends it for
// PATCH /v1/sessions/{id}.
const KindTag Kind = "tag"

// TagsVersion is the inbox version that added tags (KindTag): a
// deployment whose owners advertise it reads a tag command and keeps the
// tags of a start request (protocol.StartRequest.Tags); one that does
// not would ignore them, so nothing sends it tags.
const TagsVersion = 3

// Limits of a session's tags.
const (
	// MaxTags is the number of tags a session may carry.
	MaxTags = 16
	// MaxTagKeyBytes bounds a tag's key (which matches ^[a-z0-9_.-]{1,64}$).
	MaxTagKeyBytes = 64
	// MaxTagValueBytes bounds a tag's value: valid UTF-8 of at most this
	// many bytes (the empty value is allowed).
	MaxTagValueBytes = 256
)

// tagKeyPattern is the form of a tag key, as the schemas state it
// (validTagKey states it in Go).
const tagKeyPattern = `^[a-z0-9_.-]{1,64}$`

// ValidateTags checks a session's tags: at most MaxTags entries, every key
// matching ^[a-z0-9_.-]{1,64}$, every value valid UTF-8 of at most
// MaxTagValueBytes bytes. Nil and empty are valid (no tags). The error
// wraps ErrInvalid and names the offending key (keys are checked in
// sorted order, so the error is deterministic).
func ValidateTags(tags map[string]string) error {
	if err := checkTags(tags); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// checkTags is ValidateTags' rule, its error unwrapped (the codecs wrap
// it in their own typed errors).
func checkTags(tags map[string]string) error {
	if len(tags) == 0 {
		return nil
	}
	if len(tags) > MaxTags {
		return fmt.Errorf("%d tags, limit %d", len(tags), MaxTags)
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if err := checkTagKey(k); err != nil {
			return err
		}
		switch v := tags[k]; {
		case len(v) > MaxTagValueBytes:
			return fmt.Errorf("tag %q: value is %d bytes, limit %d", k, len(v), MaxTagValueBytes)
		case !utf8.ValidString(v):
			return fmt.Errorf("tag %q: value is not valid UTF-8", k)
		}
	}
	return nil
}

// checkTagKey checks a tag key's form.
func checkTagKey(k string) error {
	if !validTagKey(k) {
		return fmt.Errorf("tag key %q must match %s", k, tagKeyPattern)
	}
	return nil
}

// validTagKey reports whether k matches tagKeyPattern: 1 to
// MaxTagKeyBytes bytes of [a-z0-9_.-].
func validTagKey(k string) bool {
	if k == "" || len(k) > MaxTagKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// MergeTags applies a tag command's body to the tags cur: t.Set's entries
// are set (added or replaced), t.Remove's keys deleted (an absent key is
// no error). It returns a new map and never mutates cur; the result is nil
// when no tag is left. A result of more than MaxTags tags is an error
// wrapping ErrTooLarge (the session keeps cur). t is taken as valid (a
// decoded command's body; Tag's own rules are checked by Decode and
// Encode).
func MergeTags(cur map[string]string, t Tag) (map[string]string, error) {
	out := make(map[string]string, len(cur)+len(t.Set))
	maps.Copy(out, cur)
	maps.Copy(out, t.Set)
	for _, k := range t.Remove {
		delete(out, k)
	}
	if len(out) > MaxTags {
		return nil, fmt.Errorf("%w: %d tags, limit %d", ErrTooLarge, len(out), MaxTags)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// SameTags reports whether a and b hold the same tags (nil and empty are
// the same).
func SameTags(a, b map[string]string) bool { return maps.Equal(a, b) }

// Tag is the body of a tag command: a merge into the session's tags.
type Tag struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// validate checks a tag command's body: at least one of set and remove
// non-empty; set obeys ValidateTags; remove names at most MaxTags keys of
// the key form, none twice and none that set names too.
// Validate checks a tag command's body by the rules Encode applies to it
// (at least one of set and remove; set by ValidateTags; remove at most
// MaxTags keys of the key form, none twice, none also set). The error
// wraps ErrInvalid.
func (t *Tag) Validate() error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

func (t *Tag) validate() error {
	if len(t.Set) == 0 && len(t.Remove) == 0 {
		return errors.New("set or remove must name a tag")
	}
	if err := checkTags(t.Set); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	if len(t.Remove) > MaxTags {
		return fmt.Errorf("remove names %d keys, limit %d", len(t.Remove), MaxTags)
	}
	seen := make(map[string]bool, len(t.Remove))
	for _, k := range t.Remove {
		if err := checkTagKey(k); err != nil {
			return fmt.Errorf("remove: %w", err)
		}
		if seen[k] {
			return fmt.Errorf("remove names tag %q twice", k)
		}
		seen[k] = true
		if _, ok := t.Set[k]; ok {
			return fmt.Errorf("tag %q is both set and removed", k)
		}
	}
	return nil
}

// normalizeTag copies a tag command's body (empty collections nil).
func normalizeTag(t *Tag) *Tag {
	n := Tag{Remove: nilIfEmpty(slices.Clone(t.Remove))}
	if len(t.Set) > 0 {
		n.Set = maps.Clone(t.Set)
	}
	return &n
}

// normalizeTags is a session's tags in their one in-memory form: a copy,
// nil when empty.
func normalizeTags(tags map[string]string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	return maps.Clone(tags)
}

// JSONSchemaExtend states the rules of a tag command's body that a schema
// can: set and remove are not empty when present and one of them is;
// set's keys match the key form, it holds at most MaxTags entries, a value
// at most MaxTagValueBytes characters; remove names at most MaxTags keys
// of the key form, none twice. What it cannot state is the Go rules'
// (validate): a value's bound counts bytes, not characters (the Go rule is
// the stricter), and no key is both set and removed.
func (Tag) JSONSchemaExtend(s *genschema.Schema) {
	tagsSchema(prop(s, "set"))
	one, most := uint64(1), uint64(MaxTags)
	rm := prop(s, "remove")
	rm.MinItems, rm.MaxItems, rm.UniqueItems = &one, &most, true
	rm.Items.Pattern = tagKeyPattern
	s.AnyOf = []*genschema.Schema{{Required: []string{"set"}}, {Required: []string{"remove"}}}
}

// tagsSchema states a non-empty tag map (a generated map[string]string
// schema): at least one and at most MaxTags entries, keys of the key
// form, values of at most MaxTagValueBytes characters (JSON Schema counts
// code points; ValidateTags, the stricter, counts bytes).
func tagsSchema(s *genschema.Schema) {
	one, most, long := uint64(1), uint64(MaxTags), uint64(MaxTagValueBytes)
	s.MinProperties, s.MaxProperties = &one, &most
	s.PropertyNames = &genschema.Schema{Pattern: tagKeyPattern}
	s.AdditionalProperties.MaxLength = &long
}
