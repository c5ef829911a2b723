package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// segmentBytes is the inline history tail at which the owner seals the tail
// into an immutable object-store segment (well below wire.MaxInlineBytes).
// The record is encoded on every commit, so a small tail keeps commits cheap;
// a segment is written once per segmentBytes of history.
const segmentBytes = 8 << 10

// history keeps a session's sealed history segments: content-addressed
// objects in the baton_state object store, named by digest. A segment is
// written before the commit that references it, so a committed record never
// points at a missing object; a segment of a commit that lost its CAS is an
// unreferenced object.
type history struct {
	id      string // the session
	obs     Blobs
	inv     Inventory     // nil: segments are not recorded
	cache   *segmentCache // the owner's segments (nil: none)
	segs    sealed
	covered int    // history entries in the segments
	first   string // fingerprint of entry 0, to notice a rewritten history
}

// sealed are a checkpoint's history segments and their entry shape: v is 3
// once a segment holds a structured entry (wire.Checkpoint.HistoryV), 0
// while every segment is in the legacy shape older owners decode.
type sealed struct {
	refs []wire.BlobRef
	v    int
}

func newHistory(env *Env, id string) *history {
	return &history{id: id, obs: env.Blobs, inv: env.Inventory, cache: env.segments}
}

// layout splits the full history into segments and an inline tail, sealing
// the tail into a new segment when it grew past segmentBytes.
func (h *history) layout(ctx context.Context, full []runtime.Entry) (sealed, []runtime.Entry, error) {
	if h.covered > len(full) || h.covered > 0 && fingerprint(full[0]) != h.first {
		h.segs, h.covered, h.first = sealed{}, 0, "" // cleared, compacted or reset
	}
	tail := full[h.covered:]
	if approxSize(tail) < segmentBytes {
		return h.segs, tail, nil
	}
	entries := toWireHistory(tail)
	data, err := json.Marshal(entries)
	if err != nil {
		return sealed{}, nil, err
	}
	ref := wire.NewBlobRef(data)
	if err := h.put(ctx, ref, data); err != nil {
		return sealed{}, nil, err
	}
	h.segs.refs = append(slices.Clip(h.segs.refs), ref)
	if slices.ContainsFunc(entries, wire.HistoryEntry.Structured) {
		h.segs.v = 3
	}
	h.covered, h.first = len(full), fingerprint(full[0])
	return h.segs, nil, nil
}

func (h *history) put(ctx context.Context, ref wire.BlobRef, data []byte) error {
	if h.inv != nil {
		// The reference first: a segment a session refers to is never
		// deleted (CollectSegment), and one whose delete raced this put is
		// stored again below or by the deleter.
		if err := h.inv.RefSegment(ctx, h.id, ref.Digest); err != nil {
			return fmt.Errorf("session: record history segment: %w", err)
		}
	}
	if ok, err := h.obs.Has(ctx, ref.Digest); err == nil && ok {
		if err := h.keepUnrecorded(ctx, ref.Digest); err != nil {
			return err
		}
		h.cache.add(ref, data)
		return nil // content-addressed: already there
	}
	if err := h.obs.Put(ctx, ref.Digest, data); err != nil {
		return fmt.Errorf("session: store history segment: %w", err)
	}
	h.cache.add(ref, data)
	return nil
}

// keepUnrecorded marks a segment found stored that no other session has
// recorded a reference to: a build before the inventory stored it, so
// sessions that recorded nothing may refer to it, and it is never
// deleted (a session that stores it while another refers to it recorded
// its reference before storing it).
func (h *history) keepUnrecorded(ctx context.Context, digest string) error {
	if h.inv == nil {
		return nil
	}
	refs, err := h.inv.Referrers(ctx, digest)
	if err != nil {
		return fmt.Errorf("session: history segment referrers: %w", err)
	}
	if slices.ContainsFunc(refs, func(r string) bool { return r != h.id }) {
		return nil
	}
	return h.inv.KeepSegment(ctx, digest)
}

// load reads the segments back, verifying each digest, and restores the
// layout so later commits keep them.
//
// Segments this owner wrote or read before come from its cache (they are
// content-addressed and immutable, and were verified against their digest);
// the others are fetched concurrently: each fetch is several round trips
// (the object's info, then an ordered consumer for its chunks).
func (h *history) load(ctx context.Context, segs sealed, tail []runtime.Entry) ([]runtime.Entry, error) {
	parts := make([][]runtime.Entry, len(segs.refs))
	errs := make([]error, len(segs.refs))
	var wg sync.WaitGroup
	for i, ref := range segs.refs {
		if entries, ok := h.cache.decoded(ref); ok {
			parts[i] = entries
			continue
		}
		wg.Go(func() { parts[i], errs[i] = h.segment(ctx, ref) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var full []runtime.Entry
	for _, part := range parts {
		full = append(full, part...)
	}
	h.segs, h.covered = segs, len(full)
	if len(full) > 0 {
		h.first = fingerprint(full[0])
	}
	return append(full, tail...), nil
}

func (h *history) segment(ctx context.Context, ref wire.BlobRef) ([]runtime.Entry, error) {
	data, err := h.obs.Get(ctx, ref.Digest)
	if err != nil {
		return nil, fmt.Errorf("session: history segment %s: %w", ref.Digest, err)
	}
	if err := ref.Verify(data); err != nil {
		return nil, err
	}
	entries, err := decodeSegment(data)
	if err != nil {
		return nil, err
	}
	h.cache.add(ref, data)
	h.cache.keepDecoded(ref, entries)
	return entries, nil
}

// decodeSegment reads a segment of either entry shape (a legacy one is
// migrated entry by entry).
func decodeSegment(data []byte) ([]runtime.Entry, error) {
	var part []wire.HistoryEntry
	if err := json.Unmarshal(data, &part); err != nil {
		return nil, err
	}
	return fromWireHistory(part), nil
}

// segmentCacheSize and segmentCacheBytes bound an owner's segment cache: a
// segment is about segmentBytes, or one long entry (a delivery or answer of
// up to a MiB) alone.
const (
	segmentCacheSize  = 1024
	segmentCacheBytes = 64 << 20
)

// segmentCache holds the history segments an owner wrote or read, by
// digest, so a session that comes back (a handoff back, a reload) does not
// fetch them again, nor decode them again once decoded. Only data verified
// against its digest (read) or hashed into it (written) is added; the
// oldest entry goes first. The decoded entries are shared by every history
// that loads the segment: runtime.Entry values are copied into each, and
// their parts are read-only (runtime.Entry). The bounds count the encoded
// bytes; a segment kept decoded holds its entries besides (their strings a
// few times the JSON's size at most), so the cache's memory stays within a
// small multiple of segmentCacheBytes.
type segmentCache struct {
	mu    sync.Mutex
	data  map[string]*cachedSegment
	order []string
	bytes int
}

type cachedSegment struct {
	data    []byte
	entries []runtime.Entry // nil until decoded
}

func newSegmentCache() *segmentCache { return &segmentCache{data: map[string]*cachedSegment{}} }

// decoded returns a cached segment's entries, decoding it the first time
// (outside the lock).
func (c *segmentCache) decoded(ref wire.BlobRef) ([]runtime.Entry, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	seg, ok := c.data[ref.Digest]
	var entries []runtime.Entry
	if ok {
		entries = seg.entries
	}
	c.mu.Unlock()
	if !ok || entries != nil {
		return entries, ok
	}
	entries, err := decodeSegment(seg.data)
	if err != nil {
		return nil, false // verified data that does not decode: the fetch path reports it
	}
	c.keepDecoded(ref, entries)
	return entries, true
}

// keepDecoded records a cached segment's decoded entries.
func (c *segmentCache) keepDecoded(ref wire.BlobRef, entries []runtime.Entry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if seg, ok := c.data[ref.Digest]; ok && seg.entries == nil {
		seg.entries = entries
	}
}

func (c *segmentCache) add(ref wire.BlobRef, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.data[ref.Digest]; ok {
		return
	}
	for len(c.order) > 0 && (len(c.order) >= segmentCacheSize || c.bytes+len(data) > segmentCacheBytes) {
		c.bytes -= len(c.data[c.order[0]].data)
		delete(c.data, c.order[0])
		c.order = c.order[1:]
	}
	c.data[ref.Digest] = &cachedSegment{data: data}
	c.order = append(c.order, ref.Digest)
	c.bytes += len(data)
}

func fingerprint(e runtime.Entry) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// approxSize is a cheap upper-bound estimate of the tail's JSON size.
func approxSize(entries []runtime.Entry) int {
	n := 2
	for _, e := range entries {
		n += len(e.Role) + len(e.Kind) + len(e.ToolCallID) + 48
		for _, p := range e.Content {
			n += 2*(len(p.Text)+len(p.URL)+len(p.MediaType)+len(p.Name)) + 48
		}
		for _, c := range e.ToolCalls {
			n += len(c.ID) + len(c.Name) + 2*len(c.Arguments) + 48
		}
	}
	return n
}
