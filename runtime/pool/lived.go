package pool

import (
	"context"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
)

// The evidence that a run's end was no death (docs/driver.md,
// "Quarantine"): this process ran it and saw it stop — fenced (its lease
// lapsed), failed, or moved on — so the process lived. A claim by this
// same process of a record that still names that run counts no attempt
// for it (record.Boot.Lived). For a peer that takes the lease over, a run
// stopped by a fence leaves the evidence in its record: the fenced process
// releases it (releaseFenced), and a record that names no run is no death.
// A process frozen or cut off past its lease cannot: to the peer it is a
// dead one, and the peer's claim counts the run as a death's may be.

// bootOf is what this process's claim of rec knows (record.Boot): the
// state the checkpoint settles to, whether it has a step in flight, and
// whether the run the record names stopped here while this process lived.
func (o *Owner) bootOf(rec record.SessionRecord, d session.Checkpoint) record.Boot {
	return record.Boot{Settled: session.SettledState(d.Snap), InFlight: session.InFlight(d.Snap),
		Lived: o.reg.lived(rec.SessionID, rec.OwnerRunID), At: o.now().UTC()}
}

// releaseWait bounds a fenced run's release: it must land before the
// server expires the lease (a quarter of the TTL after the fence) to be
// of use, and a fenced process must not wait long for anything.
const releaseWait = 2 * time.Second

// releaseFenced lets go of the record of run s, which this process stopped
// because its lease lapsed: record.Release (no owner process or run) by a
// CAS at the revision the run last wrote. A peer that takes the lease over
// — or this process, resuming — then finds a record that names no run and
// counts no death. The CAS is the fence: if a claim came first, or a
// commit of the run landed unseen, it changes nothing, and the claim
// counts as it would have. Hibernated and ended runs settled their record
// already; a staged one is the handoff transaction's.
func (o *outside) releaseFenced(s *session.Session) {
	held := s.Held()
	if s.Hibernated() || s.Ended() != "" || held.Record.OwnerRunID != s.RunID() {
		return
	}
	rec, err := record.Release(held.Record, "fenced-"+s.RunID())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(o.cfg.LeaseTTL/4, releaseWait))
	defer cancel()
	if _, err := o.cfg.Store.UpdateSession(ctx, rec, held.Revision); err != nil {
		o.log.Debug("fenced run not released (a claim counts it as a death)", "session", s.ID(), "err", err)
		return
	}
	o.log.Debug("fenced run released", "session", s.ID(), "run", s.RunID())
}
