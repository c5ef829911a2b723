package pool

import (
	"context"
	"errors"
	"log/slog"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// Retired deployments (docs/driver.md, "Retired deployments"). "No
// responders" is not "gone": only an operator's retirement, stored in
// baton_owners, lets another deployment adopt a session whose owner is
// gone. The adopter claims it by CAS from the record's revision (the dead
// owner's epoch): a target-driven transaction, with no source to confirm.

// retirement answers whether a session of another deployment may be
// adopted here: its deployment retired (the fleet view's deploy.* keys)
// and its owner gone, or an operator retried it on this one.
type retirement struct {
	cfg    *Config
	log    *slog.Logger
	peers  *peerSet
	agents *agents
}

// isRetired reports whether dep was retired by an operator, as far as the
// fleet view knows (false until it has loaded).
func (o *retirement) isRetired(dep string) bool {
	f := o.agents.fleet.Load()
	return f != nil && f.Retired(dep)
}

// ownerGone reports whether a record has no live owner process: hibernated,
// released, or its process's lease is not live.
func (o *retirement) ownerGone(rec record.SessionRecord) bool {
	return rec.State == record.StateHibernated || rec.OwnerProcess == "" || !o.peers.live(rec.OwnerProcess)
}

// adoptable reports whether this process may adopt the session of another
// deployment of its agent: that deployment is retired, or this one is the
// agent's promoted deployment and that one has no live owner process, and
// the session has no live owner; or an operator retried the quarantined
// session on this one (record.RetryTarget). A quarantined session is never
// adoptable, nor one of another agent.
func (o *retirement) adoptable(rec record.SessionRecord) bool {
	switch {
	case rec.DeploymentID == o.cfg.Deployment, rec.State == record.StateEnded, rec.State == record.StateHandoff, rec.Quarantined():
		return false
	case rec.Retry != nil:
		return rec.Retry.DeploymentID == o.cfg.Deployment && o.ownerGone(rec)
	}
	if !o.ownerGone(rec) || !o.agents.sameAgentKnown(rec.DeploymentID) {
		return false
	}
	return o.isRetired(rec.DeploymentID) || o.agents.promotedHere(rec.DeploymentID)
}

// ErrWaitsPending refuses an unforced adoption of a session with a live
// wait (input, authorization, task, an active child or a descendant's
// wait): only an operator's forced move takes it across deployments,
// cancelling its waits (and its children's turns).
var ErrWaitsPending = errors.New("pool: session of a retired deployment has pending waits; move it with force")

// adoptRetired claims a session of a retired deployment, or one an
// operator retried on this deployment, for this process (epoch+1, this
// deployment) and runs it with BootAdopt. A session with a live wait is
// adopted only when forced — a forced move to this deployment among its
// unprocessed commands, or a forced retry —; its waits are then
// cancelled. It reports whether it claimed the session.
func (o *Owner) adoptRetired(ctx context.Context, cur record.Session) (bool, error) {
	id := cur.Record.SessionID
	d, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		// The claim reads it again, and counts the failed attempt.
		return o.load(ctx, id, runtime.BootAdopt, &cur, &runtime.AdoptInfo{})
	}
	w := d.Snap.Waits
	waits := w.Input != nil || w.Auth != nil || len(w.Tasks) > 0 ||
		wire.ActiveChildren(d.Snap.Handles, d.Snap.ChildWaits) > 0
	force := cur.Record.Retry != nil && cur.Record.Retry.Force
	if waits && !force {
		tokens, err := session.EncodedTokens(id, d.Snap.Aliases)
		if err != nil {
			return false, err
		}
		if force, err = o.forcedMove(ctx, tokens, d.Snap.Applied); err != nil {
			return false, err
		}
		if !force {
			return false, ErrWaitsPending
		}
	}
	return o.load(ctx, id, runtime.BootAdopt, &cur, &runtime.AdoptInfo{Force: force && waits})
}

// maxForcedScan bounds how many unprocessed commands forcedMove reads.
const maxForcedScan = 16

// forcedMove reports whether a forced move to this deployment is among the
// session's first unprocessed commands (leader reads).
func (o *Owner) forcedMove(ctx context.Context, tokens []string, applied runtime.Applied) (bool, error) {
	for range maxForcedScan {
		seq, err := session.Unprocessed(ctx, o.backlog, tokens, applied)
		if err != nil || seq == 0 {
			return false, err
		}
		m, err := o.inboxMsgs.Get(ctx, seq)
		if err != nil {
			return false, err
		}
		if c, err := wire.Decode(m.Data); err == nil && c.Kind == wire.KindMove && c.Move != nil &&
			c.Move.Force && c.Move.DeploymentID == o.cfg.Deployment {
			return true, nil
		}
		applied.Above = insertSorted(applied.Above, seq) // look past it
	}
	return false, nil
}

func insertSorted(list []uint64, v uint64) []uint64 {
	for i, x := range list {
		if v < x {
			return append(list[:i:i], append([]uint64{v}, list[i:]...)...)
		}
	}
	return append(list, v)
}
