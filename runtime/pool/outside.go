package pool

import (
	"log/slog"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/jsport"
)

// outside writes a session that no run of this process holds: the
// quarantine of one that cannot boot (its record CASed at the revision
// read, its committed outbox and session.quarantined appended at the
// subject's end), the floor event of one an operator ended, and the
// events a finish appends outside a commit. Every write is an owner's:
// the ingress writes no event (docs/architecture.md, invariant 13).
type outside struct {
	cfg     *Config
	log     *slog.Logger
	metrics *metrics
	events  kv.Stream            // leader reads of the events stream (appenders' last event)
	blobs   jsport.Blobs         // a kept checkpoint whose outbox cannot be read
	inv     jsport.Inventory     // its inventory record (an event refers to it: pinned)
	index   func(record.Session) // writes a record's index entry in the background (reconciler.indexLater)
}

func (o *outside) now() time.Time { return o.cfg.Now() }
