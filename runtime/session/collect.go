package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Blob collection while a session lives (docs/runtime.md, "Blobs"): a
// blob of the session that no committed checkpoint, event, history
// segment, journal entry or pending command refers to is deleted. Events
// are kept for the session's life, so a blob an event refers to is pinned
// in the inventory and stays until the session's delete; the rest is
// referred to by the committed checkpoint (its state, the admitted
// inputs' texts and payloads, the tasks' inputs, its history segments) or
// by a journal entry of a step not folded yet. After each commit lands
// the owner deletes what the previous commit referred to and this one
// does not, and the out-of-line results of the journals it removes
// (collectCommitted); what a crash left — a blob whose commit lost its
// CAS or never came, a delete that never ran — is found in the inventory
// when the session is next claimed after a run that did not stop cleanly
// (collectOrphans, Boot.Orphans; a wake of a hibernated session skips
// it: its last run collected before it hibernated).

// collectTimeout bounds one commit's blob deletes; orphansTimeout the
// claim's collection, which the boot commit waits for.
const (
	collectTimeout = 10 * time.Second
	orphansTimeout = 3 * time.Second
)

// blobRefs are the blobs a committed checkpoint refers to, by digest: the
// session's own and the shared history segments.
type blobRefs struct {
	own   map[string]bool
	segs  map[string]bool
	state string // the state blob's digest ("": inline)
}

// refsOf lists the blobs checkpoint c refers to.
func refsOf(c wire.Checkpoint) blobRefs {
	r := blobRefs{own: map[string]bool{}, segs: map[string]bool{}}
	add := func(ref *wire.BlobRef) {
		if ref != nil {
			r.own[ref.Digest] = true
		}
	}
	add(c.StateRef)
	if c.StateRef != nil {
		r.state = c.StateRef.Digest
	}
	for _, in := range c.Turn.Inputs {
		add(in.TextRef)
		add(in.PayloadsRef)
	}
	for _, t := range c.Waits.Tasks {
		add(t.InputRef)
	}
	addBusyRefs(c, add)
	for _, s := range c.HistorySegments {
		r.segs[s.Digest] = true
	}
	return r
}

// CheckpointBlobs are the digests of the session's own blobs checkpoint
// c refers to (state, admitted inputs' texts and payloads, task inputs),
// sorted: what a delete removes beside the inventory's (a blob stored
// before the inventory existed).
func CheckpointBlobs(c wire.Checkpoint) []string {
	return slices.Sorted(maps.Keys(refsOf(c).own))
}

// dropped lists what r refers to and next does not.
func (r blobRefs) dropped(next blobRefs) (own, segs []string) {
	for d := range r.own {
		if !next.own[d] {
			own = append(own, d)
		}
	}
	for d := range r.segs {
		if !next.segs[d] {
			segs = append(segs, d)
		}
	}
	slices.Sort(own)
	slices.Sort(segs)
	return own, segs
}

// collectCommitted deletes, after a commit landed, the blobs the previous
// commit referred to and this one does not, and the out-of-line results
// of the journals the commit let go (freed), unless this commit refers to
// them. It runs before the next commit is built, so a blob that commit
// stores again is never deleted under it. Without an inventory only the
// superseded state goes. A delete that fails is left to the next claim's
// collectOrphans.
func (s *Session) collectCommitted(ctx context.Context, old blobRefs, freed []string) {
	own, segs := old.dropped(s.refs)
	for _, d := range freed {
		if !s.refs.own[d] && !slices.Contains(own, d) {
			own = append(own, d)
		}
	}
	if s.env.Inventory == nil {
		own, segs = nil, nil
		if st := old.state; st != "" && st != s.refs.state {
			own = []string{st}
		}
	}
	if len(own) == 0 && len(segs) == 0 {
		return
	}
	s.env.Failpoints.Run(failpoint.BeforeCollect, failpoint.Args{SessionID: s.id})
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	for _, d := range own {
		if err := s.env.blobs.remove(ctx, s.id, d); err != nil {
			s.log.Debug("a blob no commit refers to was not deleted (the next claim collects it)", "digest", d, "err", err)
		}
	}
	for _, d := range segs {
		if _, _, err := CollectSegment(ctx, s.env.Blobs, s.env.Inventory, s.id, d); err != nil {
			s.log.Debug("a history segment no commit refers to was not collected", "digest", d, "err", err)
		}
	}
}

// collectOrphans deletes, when a run has claimed the session and before
// it commits, the blobs the inventory says the session owns that nothing
// refers to: not the claimed checkpoint (refs), not an event (pinned), not
// the journal of the step due (its re-run reads it). They are what a
// crash left: the blobs of a commit that never landed, the deletes of one
// that did.
func (s *Session) collectOrphans(ctx context.Context) {
	inv := s.env.Inventory
	if inv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, orphansTimeout)
	defer cancel()
	owned, err := inv.Owned(ctx, s.id, false)
	if err != nil {
		s.log.Debug("blob inventory not read: orphans stay until the next claim", "err", err)
		return
	}
	var orphans []string
	for _, d := range owned {
		if !s.refs.own[d] {
			orphans = append(orphans, d)
		}
	}
	if len(orphans) == 0 {
		return
	}
	keep, err := s.dueJournalBlobs(ctx)
	if err != nil {
		s.log.Debug("journal of the due step not read: orphans stay until the next claim", "err", err)
		return
	}
	n := 0
	for _, d := range orphans {
		if keep[d] {
			continue
		}
		if err := s.env.blobs.remove(ctx, s.id, d); err != nil {
			s.log.Debug("an orphaned blob was not deleted", "digest", d, "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		s.log.Info("deleted blobs nothing refers to (left by a crash)", "blobs", n)
	}
}

// dueJournalBlobs are the out-of-line results in the journal of the step
// due at the claim: its re-run reads them.
func (s *Session) dueJournalBlobs(ctx context.Context) (map[string]bool, error) {
	keep := map[string]bool{}
	if s.bootTurn == "" || s.env.Journal == nil {
		return keep, nil
	}
	for n := 1; ; n++ {
		data, _, err := s.env.Journal.Get(ctx, subjects.JournalKey(s.id, s.bootTurn, s.bootStep, n))
		if errors.Is(err, record.ErrNotFound) {
			return keep, nil
		}
		if err != nil {
			return nil, err
		}
		e, err := wire.DecodeJournalEntry(data)
		if err != nil {
			continue
		}
		if e.ResultRef != nil {
			keep[e.ResultRef.Digest] = true
		}
	}
}

// CollectSegment removes session id's reference to the shared history
// segment digest and deletes the segment once no other session refers to
// it: the live collection's and a delete's way to let go of a segment.
// It reports whether the segment was deleted and its size.
//
// A session that seals the same content meanwhile records its reference
// before it stores the segment (history.put): a reference found after the
// delete has the content stored again. The one window left is a crash
// between the delete and that second look while another session's seal
// of the same content saw the object still there.
func CollectSegment(ctx context.Context, obs Blobs, inv Inventory, id, digest string) (bool, int64, error) {
	refs, err := inv.Referrers(ctx, digest)
	if err != nil {
		return false, 0, err
	}
	others := func(refs []string) bool { return slices.ContainsFunc(refs, func(r string) bool { return r != id }) }
	if !slices.Contains(refs, id) || others(refs) {
		// Another session (or KeepReferrer) refers to it — or this one
		// never recorded its reference (a segment sealed by a build
		// before the inventory, which unrecorded sessions may share, or a
		// removal that died half way): it stays.
		return false, 0, inv.Unref(ctx, id, digest)
	}
	data, err := obs.Get(ctx, digest)
	switch {
	case errors.Is(err, ErrBlobNotFound):
		return false, 0, inv.Unref(ctx, id, digest)
	case err != nil:
		return false, 0, err
	}
	if err := obs.Delete(ctx, digest); err != nil {
		return false, 0, fmt.Errorf("session: delete history segment %s: %w", digest, err)
	}
	if refs, err = inv.Referrers(ctx, digest); err != nil || others(refs) {
		if perr := obs.Put(ctx, digest, data); perr != nil {
			return false, 0, fmt.Errorf("session: restore history segment %s another session refers to: %w", digest, perr)
		}
		if err == nil {
			err = inv.Unref(ctx, id, digest)
		}
		return false, 0, err
	}
	return true, int64(len(data)), inv.Unref(ctx, id, digest)
}
