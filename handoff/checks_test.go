package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
)

// The checks every scenario ends with, and the per-party store view they
// rest on.

// party is what one side believes at the end.
type party struct {
	name string
	run  string
	live bool
	rev  uint64 // the revision it believes it holds (live) or last knew
	rec  record.SessionRecord
}

func (sc *scenario) parties() []party {
	src := party{name: "source", run: srcRun, live: sc.sourceLive(), rev: sc.srcView.rev(), rec: sc.srcView.record()}
	if src.live {
		src.rev = sc.res.Session.Revision
	}
	cand := party{name: "candidate", run: candRun, live: sc.candidateLive(), rev: sc.candView.rev(), rec: sc.candView.record()}
	if cand.live {
		cand.rev = sc.cand.act.Session.Revision
	}
	ps := []party{src, cand}
	if sc.adopter != nil {
		ps = append(ps, party{name: "adopter", run: adoptRun, live: true, rev: sc.adopter.rev, rec: sc.adopter.rec})
	}
	return ps
}

// check asserts what every scenario must end with.
func (sc *scenario) check() {
	sc.t.Helper()
	cur := sc.leader()
	sc.final = cur
	if cur.Record.State != record.StateActive {
		sc.t.Fatalf("%s: record left in state %s", sc, cur.Record.State)
	}
	owner := sc.checkOneOwner(cur)
	sc.checkFence(cur, owner)
	sc.checkNothingLost(cur)
	sc.checkMarker(owner)
}

// checkOneOwner: exactly one party runs the session — the one the record
// names, knowing the record's revision.
func (sc *scenario) checkOneOwner(cur record.Session) party {
	sc.t.Helper()
	var owner *party
	ps := sc.parties()
	for i, p := range ps {
		if p.run == cur.Record.OwnerRunID {
			owner = &ps[i]
		}
	}
	switch {
	case owner == nil:
		sc.t.Fatalf("%s: the record names run %q, no party", sc, cur.Record.OwnerRunID)
	case !owner.live || owner.rev != cur.Revision:
		sc.t.Fatalf("%s: the record names %s at %d; it is live=%v at %d", sc, owner.name, cur.Revision, owner.live, owner.rev)
	}
	for _, p := range ps {
		if p.run != owner.run && p.live {
			sc.t.Fatalf("%s: %s (at %d) and %s (at %d) both run the session", sc, p.name, p.rev, owner.name, cur.Revision)
		}
	}
	want := map[string]string{srcRun: srcDeployment, candRun: candDeployment, adoptRun: cur.Record.DeploymentID}[owner.run]
	if cur.Record.DeploymentID != want {
		sc.t.Fatalf("%s: %s owns the record of deployment %s", sc, owner.name, cur.Record.DeploymentID)
	}
	if owner.run == srcRun && cur.Record.Epoch != sc.req.Record.Record.Epoch {
		sc.t.Fatalf("%s: the source kept the session at epoch %d (was %d)", sc, cur.Record.Epoch, sc.req.Record.Record.Epoch)
	}
	return *owner
}

// checkFence: every other party reconnects late and commits at the
// revision it last knew — each CAS fails; then the owner's commit lands.
func (sc *scenario) checkFence(cur record.Session, owner party) {
	sc.t.Helper()
	for _, p := range sc.parties() {
		if p.run == owner.run || p.rev == 0 {
			continue
		}
		rec := p.rec
		rec.WriteCounter++
		if _, err := sc.b.store.UpdateSession(sc.ctx(), rec, p.rev); !errors.Is(err, record.ErrConflict) {
			sc.t.Fatalf("%s: late commit of %s at %d: %v (want a conflict)", sc, p.name, p.rev, err)
		}
	}
	rec := cur.Record
	rec.WriteCounter++
	if _, err := sc.b.store.UpdateSession(sc.ctx(), rec, cur.Revision); err != nil {
		sc.t.Fatalf("%s: the owner %s cannot commit: %v", sc, owner.name, err)
	}
}

// checkNothingLost: the handoff never touches the checkpoint (applied
// commands) and never removes a command from the inbox.
func (sc *scenario) checkNothingLost(cur record.Session) {
	sc.t.Helper()
	if string(cur.Record.Checkpoint) != string(sc.original) {
		sc.t.Fatalf("%s: checkpoint changed", sc)
	}
	for _, seq := range append([]uint64{sc.trigger}, sc.extra...) {
		if !sc.b.holds(sc.t, seq) {
			sc.t.Fatalf("%s: inbox sequence %d is gone", sc, seq)
		}
	}
}

// checkMarker: after a fault-free run the marker is gone; after any run,
// the owner's Clean leaves none.
func (sc *scenario) checkMarker(owner party) {
	sc.t.Helper()
	if !sc.disrupted() {
		if _, _, err := sc.b.store.GetMarker(sc.ctx(), sc.id); !errors.Is(err, record.ErrNotFound) {
			sc.t.Fatalf("%s: marker left after a clean run: %v", sc, err)
		}
	}
	if _, err := handoff.Clean(sc.ctx(), sc.b.store, sc.id); err != nil {
		sc.t.Fatalf("%s: clean: %v", sc, err)
	}
	if _, _, err := sc.b.store.GetMarker(sc.ctx(), sc.id); !errors.Is(err, record.ErrNotFound) {
		sc.t.Fatalf("%s: marker left after Clean by %s: %v", sc, owner.name, err)
	}
}

// disrupted reports whether a fault that can strand a marker fired.
func (sc *scenario) disrupted() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, f := range sc.fired {
		if !strings.HasSuffix(f, "="+fCommand.String()) && !strings.HasSuffix(f, "="+fReplyLost.String()) {
			return true
		}
	}
	return false
}

// view wraps the store one party uses and remembers the newest revision
// that party is known to hold: its own landed writes (even those whose
// reply a fault dropped) and leader reads that name it.
type view struct {
	testStore
	run string
	mu  sync.Mutex
	r   uint64
	rc  record.SessionRecord
}

func (v *view) note(rec record.SessionRecord, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if rec.OwnerRunID == v.run && rev > v.r {
		v.r, v.rc = rev, rec
	}
}

func (v *view) rev() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.r
}

func (v *view) record() record.SessionRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rc
}

func (v *view) UpdateSession(ctx context.Context, rec record.SessionRecord, rev uint64) (uint64, error) {
	n, err := v.testStore.UpdateSession(ctx, rec, rev)
	if err == nil {
		v.note(rec, n)
	}
	return n, err
}

func (v *view) LeaderSession(ctx context.Context, id string) (record.Session, error) {
	s, err := v.testStore.LeaderSession(ctx, id)
	if err == nil {
		v.note(s.Record, s.Revision)
	}
	return s, err
}

// summary is a record without its checkpoint, for failure messages.
func summary(r record.SessionRecord) string {
	h := "-"
	if r.Handoff != nil {
		h = r.Handoff.ID + "/" + r.Handoff.Outcome + "/" + r.Handoff.Step
	}
	return fmt.Sprintf("{run %s deployment %s epoch %d state %s consumer %s handoff %s}",
		r.OwnerRunID, r.DeploymentID, r.Epoch, r.State, r.Consumer, h)
}
