package driver

import (
	"context"
	"fmt"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
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
func (o *Owner) claim(ctx context.Context, cur kv.Session) (*session, error) {
	snap, tokens, err := decodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("driver: session %s checkpoint: %w", cur.Record.SessionID, err)
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
	s, err := o.newSession(rec, rev, snap, tokens, 0)
	if err != nil {
		return nil, err
	}
	s.prev = cur.Record.Consumer
	return s, nil
}
