package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Load claims an existing session for this process (epoch+1) and runs it:
// crash recovery, a restart, or a wake. The index entry is written before
// the claim, so a crash in between leaves a harmless stale entry.
func (o *Owner) Load(ctx context.Context, id string, reason runtime.BootReason) error {
	if o.isLoaded(id) {
		return nil
	}
	if err := o.cfg.Store.AddIndex(ctx, o.cfg.ProcessID, id); err != nil {
		return err
	}
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	if err != nil {
		return fmt.Errorf("driver: load %s: %w", id, err)
	}
	if cur.Record.DeploymentID != o.cfg.Deployment {
		return fmt.Errorf("driver: session %s belongs to deployment %q", id, cur.Record.DeploymentID)
	}
	s, err := o.claim(ctx, cur)
	if err != nil {
		return err
	}
	o.spawn(s, reason)
	return nil
}

func (o *Owner) isLoaded(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.sessions[id]
	return ok
}

// claim CASes the record to this run: epoch+1, this process, a new consumer.
// The checkpoint (and its history segments) must be readable first: an
// owner never claims a session it cannot run.
func (o *Owner) claim(ctx context.Context, cur kv.Session) (*session, error) {
	d, err := decodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("driver: session %s checkpoint: %w", cur.Record.SessionID, err)
	}
	hist := &history{obs: o.state}
	if d.snap.History, err = hist.load(ctx, d.segments, d.snap.History); err != nil {
		return nil, fmt.Errorf("driver: session %s history: %w", cur.Record.SessionID, err)
	}
	rec := cur.Record
	run := newID()
	rec.Epoch++
	rec.OwnerRunID, rec.DeploymentID, rec.OwnerProcess = run, o.cfg.Deployment, o.cfg.ProcessID
	rec.Consumer = subjects.Consumer(rec.SessionID, rec.Epoch)
	rec.Writer, rec.WriteCounter = run, 0
	if rec.State == kv.StateHibernated || rec.State == kv.StateHandoff {
		rec.State = kv.StateActive
	}
	rev, err := o.cfg.Store.UpdateSession(ctx, rec, cur.Revision)
	if err != nil {
		return nil, fmt.Errorf("driver: claim %s: %w", rec.SessionID, err)
	}
	tokens, err := o.ownedTokens(ctx, rec.SessionID, d.snap.Aliases)
	if err != nil {
		return nil, err
	}
	s, err := o.newSession(rec, rev, d.snap, tokens, 0)
	if err != nil {
		return nil, err
	}
	s.prev, s.hist = cur.Record.Consumer, hist
	s.outbox = d.outbox // boot re-publishes it as committed, stamps and all
	return s, nil
}

// ownedTokens is the token set a booting owner filters on: the stable token
// plus every committed alias whose hook names this session. A committed
// alias without a hook (a crash between the commit and the hook) is claimed
// now; one held by another session is left out, so this session never reads
// or purges another session's address.
func (o *Owner) ownedTokens(ctx context.Context, id string, aliases []string) ([]string, error) {
	tokens := []string{subjects.StableToken(id)}
	for _, a := range aliases {
		tok, err := subjects.EncodeToken(a)
		if err != nil {
			continue
		}
		_, err = o.cfg.Store.CreateHook(ctx, kv.Hook{Token: tok, Address: a, SessionID: id, WireV: wire.CurrentVersion})
		var owned *kv.OwnedError
		switch {
		case err == nil || errors.As(err, &owned) && owned.SessionID == id:
			tokens = appendUnique(tokens, tok)
		case errors.As(err, &owned):
			o.log.Warn("alias held by another session; not filtered", "session", id, "alias", a, "owner", owned.SessionID)
		default:
			return nil, fmt.Errorf("driver: alias %q of %s: %w", a, id, err)
		}
	}
	return tokens, nil
}
