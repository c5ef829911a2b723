package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// The blob inventory (docs/kv-records.md, "Blob inventory"): the bucket
// baton_blobs holds one empty key per blob a session owns in the state
// object store and per shared history segment it refers to, so a
// session's blobs are listed — for its delete, and to collect what a
// crash left unreferenced — from the stream's subject state, and a
// segment's referrers are counted the same way, without listing the
// object store. Keys (<hex> is a digest's 64 hex digits):
//
//	c.<sessionID>.<hex>  the session's blob <sessionID>/sha256:<hex>, referred
//	                     to by its checkpoint or a journal entry: deleted once
//	                     nothing it commits refers to it
//	p.<sessionID>.<hex>  the same blob pinned: an event refers to it, so it
//	                     stays until the session is deleted
//	g.<sessionID>.<hex>  the session refers to history segment sha256:<hex>
//	r.<hex>.<sessionID>  the same reference, listed by segment
//	r.<hex>.keep         a segment stored before the inventory: never deleted
//
// A key is written before the object it names, so a crash leaves at worst
// a key without its object; a key is removed after its object, by a purge
// of its subject (no marker stays in the subject state).

// Inventory is the blob inventory bucket. It implements
// session.Inventory.
type Inventory struct {
	s      *Store // its leader reads
	b      bucket
	stream jetstream.Stream
	prefix string // $KV.<bucket>.
}

// OpenInventory opens the blob inventory bucket named by names
// (topology.Ensure creates it).
func OpenInventory(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Inventory, error) {
	if names == (subjects.Names{}) {
		return nil, invalid("zero subjects.Names (use subjects.Default or subjects.New)")
	}
	b, err := openBucket(ctx, js, names.BlobsBucket())
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, "KV_"+b.name)
	if err != nil {
		return nil, fmt.Errorf("kv: inventory stream: %w", err)
	}
	return &Inventory{s: &Store{js: js}, b: b, stream: st, prefix: subjects.KVSubject(b.name, "")}, nil
}

// digestHex is the 64 hex digits of a "sha256:<hex>" digest.
func digestHex(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", invalid("blob digest %q is not sha256:<64 hex digits>", digest)
	}
	return h, nil
}

func ownedKey(sessionID, digest string, pinned bool) (string, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return "", invalid("inventory: %w", err)
	}
	h, err := digestHex(digest)
	if err != nil {
		return "", err
	}
	kind := "c."
	if pinned {
		kind = "p."
	}
	return kind + sessionID + "." + h, nil
}

// Own records that session sessionID owns the blob of digest: pinned when
// an event refers to it. Idempotent.
func (v *Inventory) Own(ctx context.Context, sessionID, digest string, pinned bool) error {
	key, err := ownedKey(sessionID, digest, pinned)
	if err != nil {
		return err
	}
	return v.put(ctx, key)
}

func (v *Inventory) put(ctx context.Context, key string) error {
	_, err := retry(ctx, func() (uint64, error) { return v.b.kv.Put(ctx, key, nil) })
	return mapErr("put", key, err)
}

// Pinned reports whether an event of session sessionID refers to the blob
// of digest (its pinned key exists), read from the stream leader: a
// replica that missed the key would have the blob deleted.
func (v *Inventory) Pinned(ctx context.Context, sessionID, digest string) (bool, error) {
	key, err := ownedKey(sessionID, digest, true)
	if err != nil {
		return false, err
	}
	e, err := v.s.leaderLast(ctx, v.b, key)
	switch {
	case err == nil:
		return e.live(), nil
	case errors.Is(err, record.ErrNotFound):
		return false, nil
	}
	return false, err
}

// Owned lists the digests of session sessionID's blobs, the pinned ones or
// the others.
func (v *Inventory) Owned(ctx context.Context, sessionID string, pinned bool) ([]string, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return nil, invalid("inventory: %w", err)
	}
	kind := "c."
	if pinned {
		kind = "p."
	}
	keys, err := v.keys(ctx, kind+sessionID+".*")
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		keys[i] = "sha256:" + k[strings.LastIndexByte(k, '.')+1:]
	}
	return keys, nil
}

// Disown removes session sessionID's unpinned key of digest (its object
// was deleted first).
func (v *Inventory) Disown(ctx context.Context, sessionID, digest string) error {
	key, err := ownedKey(sessionID, digest, false)
	if err != nil {
		return err
	}
	return v.purge(ctx, key)
}

// RefSegment records that session sessionID refers to history segment
// digest (both directions), before the segment is stored.
func (v *Inventory) RefSegment(ctx context.Context, sessionID, digest string) error {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return invalid("inventory: %w", err)
	}
	h, err := digestHex(digest)
	if err != nil {
		return err
	}
	if err := v.put(ctx, "r."+h+"."+sessionID); err != nil {
		return err
	}
	return v.put(ctx, "g."+sessionID+"."+h)
}

// KeepReferrer is the referrer KeepSegment records: a segment stored
// before the inventory existed, which sessions that recorded nothing may
// share, is never deleted.
const KeepReferrer = "keep"

// KeepSegment records that history segment digest must never be deleted:
// it was stored by a build before the inventory, whose sessions may refer
// to it unrecorded.
func (v *Inventory) KeepSegment(ctx context.Context, digest string) error {
	h, err := digestHex(digest)
	if err != nil {
		return err
	}
	return v.put(ctx, "r."+h+"."+KeepReferrer)
}

// Segments lists the digests of the history segments session sessionID
// refers to.
func (v *Inventory) Segments(ctx context.Context, sessionID string) ([]string, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return nil, invalid("inventory: %w", err)
	}
	keys, err := v.keys(ctx, "g."+sessionID+".*")
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		keys[i] = "sha256:" + k[strings.LastIndexByte(k, '.')+1:]
	}
	return keys, nil
}

// Referrers lists the sessions that refer to history segment digest.
func (v *Inventory) Referrers(ctx context.Context, digest string) ([]string, error) {
	h, err := digestHex(digest)
	if err != nil {
		return nil, err
	}
	keys, err := v.keys(ctx, "r."+h+".*")
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		keys[i] = k[strings.LastIndexByte(k, '.')+1:]
	}
	return keys, nil
}

// Unref removes session sessionID's reference to segment digest: the
// by-segment key first, so a crash between the two leaves a key Segments
// still lists.
func (v *Inventory) Unref(ctx context.Context, sessionID, digest string) error {
	h, err := digestHex(digest)
	if err != nil {
		return err
	}
	if err := v.purge(ctx, "r."+h+"."+sessionID); err != nil {
		return err
	}
	return v.purge(ctx, "g."+sessionID+"."+h)
}

// Forget removes every key of session sessionID but its segment
// references (Unref removes those, one by one): the last step of its
// delete.
func (v *Inventory) Forget(ctx context.Context, sessionID string) error {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return invalid("inventory: %w", err)
	}
	for _, k := range []string{"c." + sessionID + ".*", "p." + sessionID + ".*"} {
		if err := v.purge(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// purge removes every message on the key (or key pattern): no marker.
func (v *Inventory) purge(ctx context.Context, key string) error {
	_, err := retry(ctx, func() (struct{}, error) {
		return struct{}{}, v.stream.Purge(ctx, jetstream.WithPurgeSubject(v.prefix+key))
	})
	if err != nil {
		return fmt.Errorf("kv: inventory purge %s: %w", key, err)
	}
	return nil
}

// keys lists the bucket's keys matching filter from the stream's subject
// state: no message is read.
func (v *Inventory) keys(ctx context.Context, filter string) ([]string, error) {
	info, err := retry(ctx, func() (*jetstream.StreamInfo, error) {
		return v.stream.Info(ctx, jetstream.WithSubjectFilter(v.prefix+filter))
	})
	if err != nil {
		return nil, fmt.Errorf("kv: inventory list %s: %w", filter, err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for s := range info.State.Subjects {
		out = append(out, strings.TrimPrefix(s, v.prefix))
	}
	return out, nil
}
