package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// checker collects the failures of checkAll (at most 40) and its counts.
type checker struct {
	f    *full
	evs  map[string][]wire.Event // per session, re-published copies dropped
	errs []error

	accepted, applied, events, moves, moveApplied int
	moved, skips                                  map[string]int
}

func (c *checker) fail(format string, a ...any) {
	if len(c.errs) < 40 {
		c.errs = append(c.errs, fmt.Errorf(format, a...))
	}
}

// readEvents reads every session's events from BATON_EVENTS (a tail,
// caught up with the stream) and drops re-published copies.
func (f *full) readEvents(ctx context.Context) (map[string][]wire.Event, int, error) {
	tail, err := harness.TailEvents(ctx, f.js, f.names)
	if err != nil {
		return nil, 0, err
	}
	defer tail.Stop()
	if err := tail.WaitCaughtUp(ctx, f.js, f.names, 5*time.Minute); err != nil {
		return nil, 0, err
	}
	if p := tail.Problems(); len(p) > 0 {
		return nil, 0, fmt.Errorf("%d events do not decode, e.g. %s", len(p), p[0])
	}
	out := map[string][]wire.Event{}
	dups := 0
	for _, s := range f.sessions {
		es, n, err := harness.Dedupe(tail.Events(s.id))
		if err != nil {
			return nil, 0, err
		}
		out[s.id], dups = es, dups+n
	}
	return out, dups, nil
}

// checkAll checks everything recorded: per session (checkSession), the
// partitioned owner (checkPartition) and the SSE streams (checkSSE).
func (f *full) checkAll(ctx context.Context) []error {
	evs, dups, err := f.readEvents(ctx)
	if err != nil {
		return []error{fmt.Errorf("read BATON_EVENTS: %w", err)}
	}
	c := &checker{f: f, evs: evs, moved: map[string]int{}, skips: map[string]int{}}
	for _, s := range f.sessions {
		c.checkSession(s)
	}
	log.Printf("checked %d events of %d sessions (%d re-published copies ignored), %d KV revisions: %d accepted commands (%d deliveries/creates applied exactly once, in order; %d forced moves, %d of them applied)",
		c.events, len(f.sessions), dups, f.kvr.Total(), c.accepted, c.applied, c.moves, c.moveApplied)
	f.figure("sessions moved blue → green: %d of %d (%d by handoff on a delivery or move, %d adopted from retired blue)", len(f.sessions), len(f.sessions), c.moved["handoff"], c.moved["adopted"])
	if len(c.skips) > 0 {
		f.figure("handoffs skipped (kind:reason → count): %v", c.skips)
	}
	c.checkPartition()
	c.checkSSE(ctx)
	return c.errs
}

// checkSession: (a) the events are contiguous; (b) every accepted command
// is applied exactly once, in order; (c) one writer at a time; (d) the
// record history keeps the epoch rules; the session ends on green.
func (c *checker) checkSession(s *fsess) {
	es := c.evs[s.id]
	c.events += len(es)
	if err := harness.Contiguous(es, 0); err != nil {
		c.fail("session %d (%s): %v: a gap", s.i, s.id, err)
	}
	applied, order := c.checkWriters(s, es)
	c.checkAccepted(s, applied, order)
	c.checkRecords(s)
	if r, ok := c.f.kvr.Latest(s.id); !ok || r.DeploymentID != c.f.c.greenID {
		c.fail("session %d (%s): last record %+v, want deployment green", s.i, s.id, r)
	}
}

// checkWriters: each run's events form one block, never resumed after a
// later run wrote; no command applied twice. It returns how often each
// inbox seq was applied and the applied seqs in order, and counts the
// handoffs and skips.
func (c *checker) checkWriters(s *fsess, es []wire.Event) (map[uint64]int, []uint64) {
	applied := map[uint64]int{}
	var order []uint64
	runsDone := map[string]bool{}
	cur := ""
	for _, e := range es {
		if e.OwnerRunID != "" && e.OwnerRunID != cur {
			if runsDone[e.OwnerRunID] {
				c.fail("session %d (%s): run %s (%s) wrote seq %d after a later run had written", s.i, s.id, e.OwnerRunID, c.f.kvr.Process(e.OwnerRunID), e.Seq)
			}
			runsDone[cur] = true
			cur = e.OwnerRunID
		}
		switch e.Kind {
		case wire.EventCommandApplied:
			var d struct{ Seq uint64 }
			_ = json.Unmarshal(e.Data, &d)
			applied[d.Seq]++
			order = append(order, d.Seq)
			if applied[d.Seq] > 1 {
				c.fail("session %d (%s): command seq %d applied %d times", s.i, s.id, d.Seq, applied[d.Seq])
			}
		case wire.EventHandoffCompleted:
			var d struct{ HandoffID string }
			_ = json.Unmarshal(e.Data, &d)
			if strings.HasPrefix(d.HandoffID, "adopt-") {
				c.moved["adopted"]++
			} else {
				c.moved["handoff"]++
			}
		case wire.EventHandoffSkipped:
			var d struct{ Reason string }
			_ = json.Unmarshal(e.Data, &d)
			c.skips[kindNames[s.kind]+":"+d.Reason]++
		}
	}
	return applied, order
}

// checkAccepted: every accepted create and delivery applied exactly once,
// the session's accepted commands in order (forced moves counted apart).
func (c *checker) checkAccepted(s *fsess, applied map[uint64]int, order []uint64) {
	s.mu.Lock()
	acc := slices.Clone(s.acc)
	s.mu.Unlock()
	mine := map[uint64]bool{}
	for _, a := range acc {
		c.accepted++
		mine[a.seq] = true
		switch {
		case a.what == "move":
			c.moves++
			c.moveApplied += applied[a.seq]
		case applied[a.seq] != 1:
			c.fail("session %d (%s, %s): accepted %s seq %d applied %d times, want once", s.i, s.id, kindNames[s.kind], a.what, a.seq, applied[a.seq])
		default:
			c.applied++
		}
	}
	var prev uint64
	for _, q := range order {
		if mine[q] {
			if q < prev {
				c.fail("session %d (%s): command seq %d applied after seq %d", s.i, s.id, q, prev)
			}
			prev = q
		}
	}
}

// checkRecords: epochs never go down; one run per epoch; a new run has a
// greater epoch than every earlier one; no write by a superseded run.
func (c *checker) checkRecords(s *fsess) {
	epochRun := map[uint64]string{}
	var maxEpoch uint64
	superseded := map[string]bool{}
	curRun := ""
	for _, o := range c.f.kvr.History(s.id) {
		if o.Deleted {
			continue
		}
		r := o.Rec
		if r.Epoch < maxEpoch {
			c.fail("session %d (%s): revision %d has epoch %d after epoch %d", s.i, s.id, o.Rev, r.Epoch, maxEpoch)
		}
		if superseded[r.Writer] {
			c.fail("session %d (%s): revision %d written by superseded run %s (%s)", s.i, s.id, o.Rev, r.Writer, c.f.kvr.Process(r.Writer))
		}
		if r.OwnerRunID != "" {
			if prevRun, ok := epochRun[r.Epoch]; ok && prevRun != r.OwnerRunID {
				c.fail("session %d (%s): epoch %d held by two runs, %s (%s) and %s (%s)", s.i, s.id, r.Epoch, prevRun, c.f.kvr.Process(prevRun), r.OwnerRunID, r.OwnerProcess)
			}
			epochRun[r.Epoch] = r.OwnerRunID
			if curRun != "" && r.OwnerRunID != curRun {
				if r.Epoch <= maxEpoch {
					c.fail("session %d (%s): run %s took over at epoch %d, not above %d", s.i, s.id, r.OwnerRunID, r.Epoch, maxEpoch)
				}
				superseded[curRun] = true
			}
			curRun = r.OwnerRunID
		}
		maxEpoch = max(maxEpoch, r.Epoch)
	}
}

// checkPartition (e): the partitioned owner ran no step after its lease
// expired: no step recorded by green-1 inside (cut + TTL, reconnect) —
// bounds from the tailer's reads, so the check never blames a step
// recorded earlier.
func (c *checker) checkPartition() {
	f := c.f
	expiry := f.cutAt.Add(f.f.leaseTTL)
	var lastDuring time.Duration
	stepsDuring := 0
	perProc := map[string]int{}
	obs := f.exec.All()
	for _, o := range obs {
		perProc[o.Process]++
	}
	log.Printf("exec logs tailed: %v step lines per process", perProc)
	for _, o := range obs {
		if o.Process != "green-1" || o.By.Before(f.cutAt) || o.NotBefore.After(f.reconnectAt) {
			continue
		}
		stepsDuring++
		lastDuring = max(lastDuring, o.NotBefore.Sub(f.cutAt))
		if o.NotBefore.After(expiry) && o.By.Before(f.reconnectAt) {
			c.fail("partitioned owner green-1 ran step %s of session %s at %v–%v after the cut, after its lease expired (TTL %v)",
				o.StepKey, o.SessionID, o.NotBefore.Sub(f.cutAt).Round(time.Millisecond), o.By.Sub(f.cutAt).Round(time.Millisecond), f.f.leaseTTL)
		}
	}
	f.figure("partitioned owner green-1: %d steps started during the cut, the last at most %v after it (lease TTL %v); 0 after the lease expired; %d events committed by its old runs after expiry",
		stepsDuring, lastDuring.Round(time.Millisecond), f.f.leaseTTL, c.lateEvents(expiry))
}

// lateEvents fails and counts each event of green-1's pre-partition runs
// stamped after its lease expired and before the reconnect. (None of those
// runs wrote a record after another run took over: checkRecords.)
func (c *checker) lateEvents(expiry time.Time) int {
	f := c.f
	late := 0
	for _, es := range c.evs {
		for _, e := range es {
			if f.greenRunsBeforeCut[e.OwnerRunID] && e.Time.After(expiry) && e.Time.Before(f.reconnectAt) {
				late++
				c.fail("session %s: event seq %d (%s) of green-1's pre-partition run %s stamped %v after the cut", e.SessionID, e.Seq, e.Kind, e.OwnerRunID, e.Time.Sub(f.cutAt))
			}
		}
	}
	return late
}

// checkSSE (f): each SSE stream is gap-free from seq 1 to its session's
// last event (waiting up to 15 s for it to catch up).
func (c *checker) checkSSE(ctx context.Context) {
	for _, st := range c.f.sse {
		want := len(c.evs[st.s.id])
		deadline := time.Now().Add(15 * time.Second)
		for {
			evs, _, _ := st.f.Snapshot()
			if len(evs) >= want || time.Now().After(deadline) || !harness.Sleep(ctx, 200*time.Millisecond) {
				break
			}
		}
		evs, connects, problems := st.f.Snapshot()
		ok := len(evs) == want && len(problems) == 0
		if len(problems) > 0 {
			c.fail("SSE of session %d (%s): %s (gap or duplicate)", st.s.i, st.s.id, problems[0])
		}
		if len(evs) != want {
			c.fail("SSE of session %d (%s): %d events, the stream holds %d", st.s.i, st.s.id, len(evs), want)
		}
		log.Printf("SSE %s session %d: %d events, seq 1..%d, %d reconnects, complete=%v", kindNames[st.s.kind], st.s.i, len(evs), want, len(connects)-1, ok)
	}
}
