package rolling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// forceHonoured switches the HITL sessions' path from "answer the input on
// blue, then move normally" to "move with force after retirement" (the
// owner cancels the pending wait with a recorded wait.cancelled and hands
// off). Owners do not act on move.force yet (docs/api.md, "Pending"): flip
// this when they do; moveWaitingForced then asserts the forced path.
const forceHonoured = true

// Known product bugs this test runs into (found while building it). Each
// switch tolerates exactly the bug's signature, logged as KNOWN BUG; set it
// to false once the bug is fixed and the test asserts the invariant fully.
const (
	// knownBugHandoffEventsLost: a candidate that activates a handoff (the
	// record says handoff completed) but whose first run never commits — it
	// is SIGKILLed, or runtime/pool/start.go's o.adopted fails and
	// restartLater reloads it — loses handoff.started/handoff.completed: the
	// next claim boots without BootHandoff, and the events were only in the
	// dead run's memory.
	knownBugHandoffEventsLost = false
	// knownBugLeaseNotReleased: an owner whose view of its own lease
	// revision went stale (a renewal that landed while its reply was lost,
	// e.g. while a NATS node restarted) fails to release the lease on
	// SIGTERM ("release lease … revision conflict", logged at debug only),
	// so its peers wait for the TTL instead of adopting at once.
	knownBugLeaseNotReleased = false
	// knownBugStaleSourceIndex: a source whose handoff transaction ends
	// unresolved (a leader read failing after a revision conflict, e.g.
	// around a NATS node restart) stops the session with an error;
	// restartLater's wake answers "elsewhere" (the session runs on green),
	// but nothing removes index.<process>.<session> from baton_owners — only
	// the next lease acquisition's resumeIndex does. The runbook's "no
	// index.blue-* key left" check then never passes while blue runs.
	knownBugStaleSourceIndex = false
)

// The session kinds: what each session does on blue just before the switch.
const (
	kindPlain = "plain" // echo traffic only
	kindSleep = "sleep" // "/sleep 2s": busy when the first green delivery comes
	kindAsk   = "ask"   // "/ask …": waits for human input (HITL)
	kindTask  = "task"  // "/task 1s": a background task pending
)

func kindOf(i int) string {
	switch i % 10 {
	case 0, 1:
		return kindSleep
	case 2:
		return kindAsk
	case 3:
		return kindTask
	}
	return kindPlain
}

type session struct {
	i       int
	id      string
	kind    string
	n       atomic.Int64 // commands sent, for idempotency keys
	request string       // kindAsk: the pending input request ID
}

// deliver sends text to s through the ingress traffic goes to.
func (w *world) deliver(s *session, text string) (ingress.Receipt, error) {
	n := s.n.Add(1)
	return w.command("", "/v1/deliveries", map[string]any{
		"sessionId": s.id, "text": text, "idempotencyKey": fmt.Sprintf("%s-%d", s.id, n),
	}, false, http.StatusAccepted)
}

// deliverApplied delivers and waits until the command is applied; it
// returns the command.applied event.
func (w *world) deliverApplied(s *session, text string) (wire.Event, error) {
	r, err := w.deliver(s, text)
	if err != nil {
		return wire.Event{}, err
	}
	if err := w.tail.WaitApplied(context.Background(), s.id, r.Seq, wait); err != nil {
		return wire.Event{}, err
	}
	ev, _ := harness.Find(w.tail.Events(s.id), harness.IsAppliedSeq(r.Seq))
	return ev, nil
}

// pace spaces one session's commands like a human conversation (load
// shaping, not synchronisation: every wait in this test polls a condition).
func pace(ctx context.Context) {
	harness.Sleep(ctx, time.Duration(600+rand.IntN(900))*time.Millisecond)
}

func TestRollingUpgrade(t *testing.T) {
	began := time.Now()
	n := testsize.Pick(100, 300)
	w := newWorld(t)

	// Blue: two owners (the first creates the topology, R3) and an ingress.
	blue1 := w.owner("blue", "blue-1")
	w.observe()
	blue2 := w.owner("blue", "blue-2")
	ingBlue := w.startIngress("blue")
	w.current.Store(w.base("blue"))
	t.Logf("topology up (3 NATS nodes, blue ×2, ingress blue) in %s", time.Since(began).Round(time.Millisecond))

	// n sessions created on blue through blue's ingress.
	sessions := make([]*session, n)
	for i := range sessions {
		sessions[i] = &session{i: i, kind: kindOf(i)}
	}
	if err := harness.Each(sessions, 8, func(s *session) error { return w.create(s) }); err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*session{}
	for _, s := range sessions {
		byKind[s.kind] = append(byKind[s.kind], s)
	}

	// A few clients follow their session over SSE from seq 0, across the
	// handoff and the switch of ingress.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var followers []*harness.Follower
	for _, i := range []int{0, 2, 3, 4, 5} {
		if i < n {
			followers = append(followers, w.follow(ctx, sessions[i].id))
		}
	}

	// Steady traffic on blue while green starts.
	var applied atomic.Int64
	stopBlue := make(chan struct{})
	blueDone := make(chan error, 1)
	go func() {
		blueDone <- harness.Each(sessions, n, func(s *session) error {
			for {
				select {
				case <-stopBlue:
					return nil
				default:
				}
				if _, err := w.deliverApplied(s, fmt.Sprintf("blue %d-%d", s.i, s.n.Load()+1)); err != nil {
					return err
				}
				applied.Add(1)
				pace(ctx)
			}
		})
	}()

	// Green: owners first, then its ingress (docs/operations.md, steps 2–3).
	green1 := w.owner("green", "green-1")
	w.owner("green", "green-2")
	w.startIngress("green")
	// Every session has had blue traffic beyond its first message.
	w.eventually("a blue delivery applied on every session", func() bool {
		for _, s := range sessions {
			if len(w.accepted.Get(s.id)) < 2 {
				return false
			}
		}
		return true
	})
	close(stopBlue)
	if err := <-blueDone; err != nil {
		t.Fatal(err)
	}

	// Just before the switch: HITL sessions ask, task sessions start a
	// task, sleep sessions start a long step.
	if err := harness.Each(byKind[kindAsk], 16, func(s *session) error {
		if _, err := w.deliverApplied(s, "/ask favourite colour?"); err != nil {
			return err
		}
		return poll(wait, func() bool {
			ev, ok := harness.Find(w.tail.Events(s.id), harness.IsKind(wire.EventInputRequested))
			if ok {
				var d wire.InputRequested
				_ = json.Unmarshal(ev.Data, &d)
				s.request = d.RequestID
			}
			return ok
		})
	}); err != nil {
		t.Fatal(err)
	}
	busy := slices.Concat(byKind[kindTask], byKind[kindSleep])
	if err := harness.Each(busy, len(busy), func(s *session) error {
		cmd := "/sleep 2s"
		if s.kind == kindTask {
			cmd = "/task 1s"
		}
		_, err := w.deliverApplied(s, cmd)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// Switch the traffic to green's ingress and stop blue's (step 4). SSE
	// clients lose their stream and resume on green with Last-Event-ID.
	switchAt := time.Now()
	w.current.Store(w.base("green"))
	w.sigterm("ingress blue", ingBlue)

	// The drain report counts down for blue (watched on green's ingress).
	drain := w.watchDrain(ctx, w.base("green"))

	// Steady traffic on green: every session but the HITL ones. Idle
	// sessions move at their next delivery; busy ones stay and move at a
	// later delivery that finds them idle.
	moving := slices.DeleteFunc(slices.Clone(sessions), func(s *session) bool { return s.kind == kindAsk })
	stopGreen := make(chan struct{})
	greenDone := make(chan error, 1)
	go func() {
		greenDone <- harness.Each(moving, len(moving), func(s *session) error {
			for {
				ev, err := w.deliverApplied(s, fmt.Sprintf("green %d-%d", s.i, s.n.Load()+1))
				if err != nil {
					return err
				}
				applied.Add(1)
				select {
				case <-stopGreen:
					if ev.DeploymentID == "green" {
						return nil
					}
				default:
				}
				pace(ctx)
			}
		})
	}()
	onGreen := func() int {
		c := 0
		for _, s := range sessions {
			if w.records.On(s.id, "green") {
				c++
			}
		}
		return c
	}

	// Midway: SIGKILL green-1; green-2 adopts its sessions at lease expiry.
	w.eventually("a third of the sessions on green", func() bool { return onGreen() >= n/3 })
	var held []string
	for _, s := range sessions {
		if r, ok := w.records.Latest(s.id); ok && r.OwnerProcess == "green-1" {
			held = append(held, s.id)
		}
	}
	if len(held) == 0 {
		t.Fatal("green-1 holds no session when it is killed: the failover would prove nothing")
	}
	sig := syscall.SIGKILL
	if os.Getenv("BATON_ROLLING_SIGQUIT") == "1" { // diagnostics: a goroutine dump instead of a silent death
		sig = syscall.SIGQUIT
	}
	if err := green1.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	killAt := time.Now()
	w.kills = append(w.kills, harness.Killed("green-1", killAt))
	green1.Wait(t, wait)
	w.eventually("green-2 holds every session green-1 held", func() bool {
		for _, s := range sessions {
			if r, ok := w.records.Latest(s.id); ok && r.OwnerProcess == "green-1" {
				return false
			}
		}
		return true
	})
	failover := time.Since(killAt)
	for _, id := range held {
		if r, _ := w.records.Latest(id); r.OwnerProcess != "green-2" || r.DeploymentID != "green" {
			t.Fatalf("session %s held by green-1 is now %s/%s, want green/green-2", id, r.DeploymentID, r.OwnerProcess)
		}
	}
	t.Logf("failover: green-1 SIGKILLed holding %d sessions; green-2 held them all %s later (lease TTL %s)",
		len(held), failover.Round(time.Millisecond), leaseTTL)

	// Midway: one NATS node stops; traffic goes on on two; it restarts.
	const node = 1
	before := applied.Load()
	stopAt := time.Now()
	w.nodes.Stop(node)
	w.eventually("20 commands applied with a NATS node down", func() bool { return applied.Load() >= before+20 })
	down := time.Since(stopAt)
	if err := w.nodes.Start(node, wait); err != nil {
		t.Fatalf("restart NATS node %d: %v", node+1, err)
	}
	t.Logf("NATS node n%d down %s (%d commands applied meanwhile), back and current %s after it stopped",
		node+1, down.Round(time.Millisecond), applied.Load()-before, time.Since(stopAt).Round(time.Millisecond))

	// Every session but the HITL ones moves; the drain report then lists
	// exactly the HITL sessions on blue, not idle because of input.
	w.eventually("every non-HITL session on green", func() bool { return onGreen() == len(moving) })
	close(stopGreen)
	if err := <-greenDone; err != nil {
		t.Fatal(err)
	}
	// The report counts sessions by state from the index's postings. The
	// failover above SIGKILLed green-1, maybe between the postings and
	// the entry of a session it was moving: that stale posting counts
	// until an owner's reconciler removes it, once older than its grace
	// (a minute) at its next run (every 30 s) — the index's documented
	// bound (kv.Index.Put), not a minute of this test's choosing.
	const staleHeal = 90 * time.Second
	var rep map[string]*ingress.DeploymentReport
	var repErr error
	if err := poll(wait+staleHeal, func() bool {
		rep, repErr = w.drainReport(w.base("green"))
		return repErr == nil && harness.Live(rep["blue"]) == len(byKind[kindAsk])
	}); err != nil {
		if b := rep["blue"]; b != nil {
			t.Logf("blue's last report: sessions by state %v, idle %d, not idle %+v", b.Sessions, b.Idle, b.NotIdle)
		}
		_, body, lerr := w.do(http.MethodGet, w.base("green")+"/v1/admin/sessions?deployment=blue&limit=100", nil, true)
		t.Logf("the index's listing of blue: %s %v", body, lerr)
		t.Fatalf("drain report: want only the %d HITL sessions left on blue %s after every other moved (last error %v)",
			len(byKind[kindAsk]), wait+staleHeal, repErr)
	}
	blueRep := rep["blue"]
	if blueRep.Idle != 0 || len(blueRep.NotIdle) != len(byKind[kindAsk]) {
		t.Fatalf("drain report for blue: idle %d, not idle %+v; want the %d HITL sessions, none idle", blueRep.Idle, blueRep.NotIdle, len(byKind[kindAsk]))
	}
	for _, s := range blueRep.NotIdle {
		if s.Why != wire.SkipInput || !slices.ContainsFunc(byKind[kindAsk], func(a *session) bool { return a.id == s.SessionID }) {
			t.Fatalf("drain report lists %+v on blue; want only HITL sessions, why input", s)
		}
	}

	// Retire blue. A forced move is refused before (not_retired); a move
	// to blue is refused after (target_retired).
	if len(byKind[kindAsk]) > 0 {
		w.adminRefused("/v1/admin/sessions/"+byKind[kindAsk][0].id+"/move", map[string]any{"deploymentId": "green", "force": true},
			http.StatusConflict, "not_retired")
	}
	w.retire("blue")
	w.adminRefused("/v1/admin/sessions/"+moving[0].id+"/move", map[string]any{"deploymentId": "blue"},
		http.StatusConflict, "target_retired")

	// HITL sessions.
	if forceHonoured {
		w.moveWaitingForced(byKind[kindAsk])
	} else {
		w.answerThenMove(byKind[kindAsk])
	}

	// Blue is drained.
	w.eventually("drain report: blue drained", func() bool {
		r, err := w.drainReport(w.base("green"))
		return err == nil && harness.Live(r["blue"]) == 0 && r["blue"].Retired
	})
	drained := time.Since(switchAt)
	series := drain.stop()
	if len(series) == 0 || series[len(series)-1] != 0 {
		series = append(series, 0)
	}
	t.Logf("drain: blue's live sessions per drain report %v; drained %s after the switch", series, drained.Round(time.Millisecond))
	for i := 1; i < len(series); i++ {
		if series[i] > series[i-1] {
			t.Fatalf("drain report: blue's live sessions went up: %v", series)
		}
	}

	// Blue's owners hold nothing (runbook step 6: the operator waits until
	// no index.blue-* key is left; a source's handoff transaction still
	// settling keeps its entry); SIGTERM stops them and releases their
	// leases.
	var idx []string
	if err := poll(wait, func() bool {
		idx = nil
		for _, pid := range []string{"blue-1", "blue-2"} {
			ids, err := w.Store.ListIndex(t.Context(), pid)
			if err != nil && !errors.Is(err, record.ErrNotFound) {
				return false
			}
			idx = append(idx, ids...)
		}
		return len(idx) == 0 || (knownBugStaleSourceIndex && w.allStaleAfterElsewhere(idx))
	}); err != nil {
		for _, id := range idx {
			t.Logf("session %s: events %s\nrecords:%s", id, harness.Trace(w.tail.Events(id)), w.records.Explain(id))
		}
		t.Fatalf("blue's index still lists %v %s after blue drained", idx, wait)
	}
	if len(idx) > 0 {
		t.Logf("KNOWN BUG (stale source index): blue's index still lists %v (on green; their blue run stopped unresolved and its restart was answered \"elsewhere\")", idx)
	} else {
		t.Logf("blue's index empty %s after the switch", time.Since(switchAt).Round(time.Millisecond))
	}
	// Both at once, as "stop the old deployment" does. (One after the
	// other, the survivor sees the first's release as an expiry and takes
	// the key over to adopt its sessions; the takeover then expires with
	// its TTL.)
	for _, p := range []*proctest.Proc{blue1, blue2} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for name, p := range map[string]*proctest.Proc{"owner blue-1": blue1, "owner blue-2": blue2} {
		if code := p.Wait(t, wait); code != 0 {
			t.Fatalf("%s: exit code %d after SIGTERM", name, code)
		}
	}
	blues := map[string]*proctest.Proc{"blue-1": blue1, "blue-2": blue2}
	for pid, p := range blues {
		switch {
		case p.Contains(`"msg":"lease released"`):
		case leaseLostToPeer(p.Output(), blues[other(pid)].Output(), pid, other(pid)):
			// On a loaded machine this owner missed its renewals and fenced
			// itself, its peer took the lease over (as it must) after the
			// fence, and the owner had not acquired it again when SIGTERM
			// came: there is no lease of its own left to release.
			t.Logf("%s fenced itself and %s took its lease over; nothing to release", pid, other(pid))
		case knownBugLeaseNotReleased && p.Contains(`"msg":"release lease"`) && p.Contains("revision conflict: release lease."+pid):
			t.Logf("KNOWN BUG (lease not released): %s's release on SIGTERM lost a revision conflict; its lease expires with the TTL", pid)
		default:
			t.Fatalf("%s did not release its lease on SIGTERM", pid)
		}
	}
	w.eventually("no blue lease left", func() bool {
		for _, pid := range []string{"blue-1", "blue-2"} {
			if _, _, err := w.Store.GetLease(t.Context(), pid); !errors.Is(err, record.ErrNotFound) {
				return false
			}
		}
		return true
	})

	// A last delivery to every session is applied on green.
	if err := harness.Each(sessions, 16, func(s *session) error {
		ev, err := w.deliverApplied(s, fmt.Sprintf("after %d", s.i))
		if err == nil && ev.DeploymentID != "green" {
			err = fmt.Errorf("session %s: last delivery applied on %s", s.id, ev.DeploymentID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	w.eventually("every session settled", func() bool {
		for _, s := range sessions {
			evs := w.tail.Events(s.id)
			if len(evs) == 0 || evs[len(evs)-1].Kind != wire.EventSessionWaiting {
				return false
			}
		}
		return true
	})
	for _, f := range followers {
		w.eventually("SSE client of "+f.Session()+" caught up", func() bool {
			evs, _, _ := f.Snapshot()
			return len(evs) == len(w.tail.Events(f.Session()))
		})
	}
	cancel()

	w.check(sessions, followers)
	w.figures(sessions, switchAt)
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}

// allStaleAfterElsewhere reports the signature of knownBugStaleSourceIndex
// for every listed session: it runs on green (leader read), and a blue owner
// logged its restart of the session answered "elsewhere".
func (w *world) allStaleAfterElsewhere(ids []string) bool {
	var logs []string
	for name, runs := range w.procs.All() {
		if strings.HasPrefix(name, "owner blue-") {
			for _, p := range runs {
				logs = append(logs, p.Output())
			}
		}
	}
	for _, id := range ids {
		r, err := w.Store.LeaderSession(w.t.Context(), id)
		if err != nil || r.Record.DeploymentID != "green" {
			return false
		}
		if !slices.ContainsFunc(logs, func(out string) bool {
			for line := range strings.Lines(out) {
				if strings.Contains(line, `"msg":"restarted a failed session"`) && strings.Contains(line, `"session":"`+id+`"`) &&
					strings.Contains(line, `"outcome":"elsewhere"`) {
					return true
				}
			}
			return false
		}) {
			return false
		}
	}
	return true
}

// activatedNeverCommitted reports the signature of knownBugHandoffEventsLost:
// the record history has exactly one green activation (a handoff completed
// at step activate) whose run never wrote again before another run claimed
// the next epoch.
func (w *world) activatedNeverCommitted(sid string) bool {
	hist := w.records.History(sid)
	for i, h := range hist {
		r := h.Rec
		if r.Handoff == nil || r.Handoff.Outcome != "completed" || r.DeploymentID != "green" || r.WriteCounter != 0 {
			continue
		}
		for _, later := range hist[i+1:] {
			if later.Rec.OwnerRunID == r.OwnerRunID {
				return false // the candidate committed
			}
			if later.Rec.Epoch > r.Epoch {
				return true
			}
		}
		return false
	}
	return false
}

// create starts s on blue through blue's ingress with a first message.
func (w *world) create(s *session) error {
	code, b, err := w.do(http.MethodPost, w.base("blue")+"/v1/sessions",
		map[string]any{"alias": fmt.Sprintf("rolling-%03d", s.i), "text": fmt.Sprintf("hello %d", s.i)}, false)
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("POST /v1/sessions: %d %s %v", code, b, err)
	}
	var r ingress.Receipt
	if err := json.Unmarshal(b, &r); err != nil || !r.Created || r.DeploymentID != "blue" || r.Seq == 0 {
		return fmt.Errorf("POST /v1/sessions: %s %v", b, err)
	}
	s.id = r.SessionID
	w.accepted.Add(s.id, harness.Accepted{Seq: r.Seq, What: "hello", Via: "blue"})
	return w.tail.WaitApplied(context.Background(), s.id, r.Seq, wait)
}

// answerThenMove is the HITL path while owners ignore move.force: the
// input is answered (an input.response, applied on blue, never a trigger),
// and once the session is idle an unforced admin move hands it off.
func (w *world) answerThenMove(ss []*session) {
	w.t.Helper()
	if err := harness.Each(ss, 16, func(s *session) error {
		r, err := w.command("green", "/v1/sessions/"+s.id+"/input", map[string]any{
			"requestId": s.request, "value": "green", "idempotencyKey": s.id + "-answer",
		}, false, http.StatusAccepted)
		if err != nil {
			return err
		}
		if err := w.tail.WaitApplied(context.Background(), s.id, r.Seq, wait); err != nil {
			return err
		}
		if err := poll(wait, func() bool {
			evs := w.tail.Events(s.id)
			return len(evs) > 0 && evs[len(evs)-1].Kind == wire.EventSessionWaiting
		}); err != nil {
			return fmt.Errorf("session %s not idle after its answer: %s", s.id, harness.Trace(w.tail.Events(s.id)))
		}
		if ev, _ := harness.Find(w.tail.Events(s.id), harness.IsAppliedSeq(r.Seq)); ev.DeploymentID != "blue" {
			return fmt.Errorf("session %s: answer applied on %q, want blue", s.id, ev.DeploymentID)
		}
		return w.moveToGreen(s, false)
	}); err != nil {
		w.t.Fatal(err)
	}
}

// moveWaitingForced is the HITL path once owners honour move.force (docs/handoff.md
// ): a forced move of a retired deployment's session cancels its pending
// wait with a recorded wait.cancelled and hands off.
func (w *world) moveWaitingForced(ss []*session) {
	w.t.Helper()
	if err := harness.Each(ss, 16, func(s *session) error {
		if err := w.moveToGreen(s, true); err != nil {
			return err
		}
		ev, ok := harness.Find(w.tail.Events(s.id), harness.IsKind(wire.EventWaitCancelled))
		var d wire.WaitCancelled
		if ok {
			_ = json.Unmarshal(ev.Data, &d)
		}
		if !ok || d.Wait != wire.WaitInput || d.RequestID != s.request || ev.DeploymentID != "blue" {
			return fmt.Errorf("forced move of %s: want wait.cancelled {input %s} on blue, got %v %+v", s.id, s.request, ok, ev)
		}
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
}

// moveToGreen moves s to green and waits until its record says so. A move
// whose handoff failed (handoff.failed: the candidate was unavailable,
// fenced for a moment on a loaded machine) leaves the session where it was
// with the failure recorded; the operator moves it again (docs/api.md),
// here at most twice more. The session must end on green either way.
func (w *world) moveToGreen(s *session, force bool) error {
	failures := func() int { return harness.Count(w.tail.Events(s.id), wire.EventHandoffFailed) }
	for attempt := 1; ; attempt++ {
		before := failures()
		if _, err := w.move(s, force, attempt); err != nil {
			return err
		}
		if err := poll(wait, func() bool { return w.records.On(s.id, "green") || failures() > before }); err != nil {
			return fmt.Errorf("move of %s (force %v): not on green; events %s", s.id, force, harness.Trace(w.tail.Events(s.id)))
		}
		if w.records.On(s.id, "green") {
			return nil
		}
		var ev wire.Event // the last handoff.failed
		for _, e := range w.tail.Events(s.id) {
			if e.Kind == wire.EventHandoffFailed {
				ev = e
			}
		}
		if attempt == 3 {
			return fmt.Errorf("move of %s (force %v): its handoff failed %d times, the last %s; events %s",
				s.id, force, attempt, ev.Data, harness.Trace(w.tail.Events(s.id)))
		}
		w.t.Logf("move of %s (force %v), attempt %d: the handoff failed (%s); moving it again", s.id, force, attempt, ev.Data)
	}
}

// move POSTs an admin move of s to green (attempt: one idempotency key
// each).
func (w *world) move(s *session, force bool, attempt int) (ingress.Receipt, error) {
	return w.command("green", "/v1/admin/sessions/"+s.id+"/move", map[string]any{
		"deploymentId": "green", "force": force, "idempotencyKey": fmt.Sprintf("%s-move-%v-%d", s.id, force, attempt),
	}, true, http.StatusAccepted)
}

// adminRefused wants the admin route to refuse with status and code.
func (w *world) adminRefused(path string, body map[string]any, status int, code string) {
	w.t.Helper()
	st, b, err := w.do(http.MethodPost, w.base("green")+path, body, true)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err != nil || st != status || json.Unmarshal(b, &e) != nil || e.Error.Code != code {
		w.t.Fatalf("POST %s %v: %d %s %v; want %d %s", path, body, st, b, err, status, code)
	}
}

// retire retires dep via the admin route, twice: the second changes nothing.
func (w *world) retire(dep string) {
	w.t.Helper()
	for i, changed := range []bool{true, false} {
		st, b, err := w.do(http.MethodPost, w.base("green")+"/v1/admin/deployments/"+dep+"/retire", nil, true)
		var r struct {
			Retired, Changed bool
		}
		if err != nil || st != http.StatusOK || json.Unmarshal(b, &r) != nil || !r.Retired || r.Changed != changed {
			w.t.Fatalf("retire %s (#%d): %d %s %v", dep, i+1, st, b, err)
		}
	}
}

// drainWatch polls the drain report and keeps blue's live count each time
// it changes.
type drainWatch struct {
	mu     sync.Mutex
	series []int
	quit   chan struct{}
	done   chan struct{}
}

func (w *world) watchDrain(ctx context.Context, base string) *drainWatch {
	d := &drainWatch{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for {
			if r, err := w.drainReport(base); err == nil {
				c := harness.Live(r["blue"])
				d.mu.Lock()
				if len(d.series) == 0 || d.series[len(d.series)-1] != c {
					d.series = append(d.series, c)
				}
				d.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-d.quit:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return d
}

func (d *drainWatch) stop() []int {
	close(d.quit)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.series)
}

// firstMissing is the lowest missed epoch after epoch from.
func firstMissing(missing map[uint64]bool, from uint64) (uint64, bool) {
	best, ok := uint64(0), false
	for e := range missing {
		if e > from && (!ok || e < best) {
			best, ok = e, true
		}
	}
	return best, ok
}

// check runs the invariants over everything observed.
func (w *world) check(sessions []*session, followers []*harness.Follower) {
	t := w.t
	t.Helper()
	var lostHandoffEvents []string
	defer func() {
		if len(lostHandoffEvents) > 0 {
			t.Logf("KNOWN BUG (handoff events lost): %d sessions moved to green (record: handoff completed) but their candidate run never committed; no handoff.started/handoff.completed in their events: %v",
				len(lostHandoffEvents), lostHandoffEvents)
			t.Logf("e.g. %s: records:%s", lostHandoffEvents[0], w.records.Explain(lostHandoffEvents[0]))
		}
	}()
	runEpoch := map[string]uint64{}              // owner run → epoch
	epochOf := map[string]record.SessionRecord{} // session/epoch → record
	for _, s := range sessions {
		// One owner per session at every moment: the record's history.
		hist := w.records.History(s.id)
		if len(hist) == 0 {
			t.Errorf("session %s: no record revision seen", s.id)
		}
		var last record.SessionRecord
		runs := map[uint64]string{}
		// Epochs whose every revision the watcher missed: on a loaded
		// machine a NATS node restart can hold the watcher back while a
		// session writes more revisions than the bucket keeps (history 8).
		// The events of such an epoch's run are still checked for order.
		missing := map[uint64]bool{}
		released := map[uint64]bool{}
		for i, h := range hist {
			if h.Deleted {
				t.Errorf("session %s: record deleted at rev %d", s.id, h.Rev)
			}
			r := h.Rec
			for e := last.Epoch + 1; e < r.Epoch; e++ {
				missing[e] = true
			}
			if i > 0 && (h.Rev <= hist[i-1].Rev || r.Epoch < last.Epoch) {
				t.Errorf("session %s: rev %d epoch %d after rev %d epoch %d", s.id, h.Rev, r.Epoch, hist[i-1].Rev, last.Epoch)
			}
			if released[r.Epoch] {
				t.Errorf("session %s rev %d: a write at epoch %d after that epoch's release", s.id, h.Rev, r.Epoch)
			}
			if r.OwnerRunID == "" && r.OwnerProcess == "" && r.Writer != "" && (r.State == record.StateActive || r.State == record.StatePaused) && r.Epoch == last.Epoch && i > 0 {
				// A fenced process's release of a run it saw stop (under
				// load an owner misses its renewals): it names no run and is
				// the last write of its epoch; the next claim takes epoch+1.
				released[r.Epoch] = true
				last = r
				continue
			}
			if r.OwnerRunID == "" || !strings.HasPrefix(r.OwnerProcess, r.DeploymentID+"-") {
				t.Errorf("session %s rev %d: owner run %q process %q deployment %q", s.id, h.Rev, r.OwnerRunID, r.OwnerProcess, r.DeploymentID)
			}
			if prev, ok := runs[r.Epoch]; ok && prev != r.OwnerRunID {
				t.Errorf("session %s: epoch %d held by runs %s and %s", s.id, r.Epoch, prev, r.OwnerRunID)
			}
			if e, ok := runEpoch[r.OwnerRunID]; ok && e != r.Epoch {
				t.Errorf("session %s: run %s at epochs %d and %d", s.id, r.OwnerRunID, e, r.Epoch)
			}
			if prev, ok := epochOf[fmt.Sprintf("%s/%d", s.id, r.Epoch)]; ok && (prev.DeploymentID != r.DeploymentID || prev.OwnerProcess != r.OwnerProcess) {
				t.Errorf("session %s epoch %d: %s/%s then %s/%s", s.id, r.Epoch, prev.DeploymentID, prev.OwnerProcess, r.DeploymentID, r.OwnerProcess)
			}
			runs[r.Epoch] = r.OwnerRunID
			runEpoch[r.OwnerRunID] = r.Epoch
			epochOf[fmt.Sprintf("%s/%d", s.id, r.Epoch)] = r
			last = r
		}
		cur, err := w.Store.LeaderSession(t.Context(), s.id)
		if err != nil || cur.Revision != hist[len(hist)-1].Rev {
			t.Errorf("session %s: leader revision %d (%v), watcher's last %d", s.id, cur.Revision, err, hist[len(hist)-1].Rev)
		}
		if last.DeploymentID != "green" || last.State != record.StateActive {
			t.Errorf("session %s ends %s/%s", s.id, last.DeploymentID, last.State)
		}

		// The event stream: contiguous, one owner run at a time in epoch
		// order, each event stamped with its epoch's deployment; exactly one
		// blue→green handoff.
		evs := w.tail.Events(s.id)
		epoch, handoffs := uint64(0), 0
		missedDep := map[string]string{} // run of a missed epoch → its deployment
		seenCmd, seenSeq := map[string]bool{}, map[uint64]bool{}
		var lastApplied uint64
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				t.Errorf("session %s: event %d has seq %d: %s", s.id, i+1, ev.Seq, harness.Trace(evs))
			}
			e, ok := runEpoch[ev.OwnerRunID]
			if !ok {
				if e, ok = firstMissing(missing, epoch); ok {
					t.Logf("session %s: event %d by run %s of epoch %d, whose record revisions the watcher missed", s.id, ev.Seq, ev.OwnerRunID, e)
					runEpoch[ev.OwnerRunID] = e
					delete(missing, e)
				} else {
					t.Errorf("session %s: event %d by run %s, which no record revision names", s.id, ev.Seq, ev.OwnerRunID)
				}
			}
			if e < epoch {
				t.Errorf("session %s: event %d by epoch %d after epoch %d: two owners", s.id, ev.Seq, e, epoch)
			}
			epoch = e
			if r, known := epochOf[fmt.Sprintf("%s/%d", s.id, e)]; known && ev.DeploymentID != r.DeploymentID {
				t.Errorf("session %s: event %d stamped %s by epoch %d of %s", s.id, ev.Seq, ev.DeploymentID, e, r.DeploymentID)
			} else if !known {
				// A missed epoch's run is of one deployment throughout.
				if d, ok := missedDep[ev.OwnerRunID]; ok && d != ev.DeploymentID {
					t.Errorf("session %s: event %d of run %s (epoch %d, missed) stamped %s after %s", s.id, ev.Seq, ev.OwnerRunID, e, ev.DeploymentID, d)
				}
				missedDep[ev.OwnerRunID] = ev.DeploymentID
			}
			switch ev.Kind {
			case wire.EventCommandApplied:
				var d wire.CommandApplied
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				if seenCmd[d.CommandID] || seenSeq[d.Seq] {
					t.Errorf("session %s: command %s (seq %d) applied twice", s.id, d.CommandID, d.Seq)
				}
				if d.Seq <= lastApplied {
					t.Errorf("session %s: command seq %d applied after seq %d: out of order", s.id, d.Seq, lastApplied)
				}
				seenCmd[d.CommandID], seenSeq[d.Seq], lastApplied = true, true, d.Seq
			case wire.EventHandoffCompleted:
				var d wire.HandoffCompleted
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				if d.FromDeploymentID != "blue" || d.ToDeploymentID != "green" {
					t.Errorf("session %s: handoff %+v", s.id, d)
				}
				handoffs++
			}
		}
		if handoffs == 0 && knownBugHandoffEventsLost && w.activatedNeverCommitted(s.id) {
			lostHandoffEvents = append(lostHandoffEvents, s.id)
			handoffs = 1
		}
		if handoffs != 1 {
			t.Errorf("session %s: %d handoff.completed, want 1: %s\nrecords:%s", s.id, handoffs, harness.Trace(evs), w.records.Explain(s.id))
		}
		// Every accepted command applied exactly once.
		for _, a := range w.accepted.Get(s.id) {
			if !seenSeq[a.Seq] {
				t.Errorf("session %s: accepted command seq %d (%q via %s) never applied: %s", s.id, a.Seq, a.What, a.Via, harness.Trace(evs))
			}
		}
	}

	// No committed step ran twice: each turn.step key ran once, last in the
	// process that owned the session at the committing epoch. A step that
	// an owner ran but did not commit may run again (the documented
	// at-least-once boundary) only when that run was stopped before its
	// commit landed, as evidenced for that run between the two runs: the
	// SIGKILL of green-1, a fence or a stopped session in the log of the
	// run's own process, or the step.interrupted record of a new owner
	// (harness.RerunEvidence). A step never committed was stopped too.
	execs := w.execs()
	stops := append(w.procs.OwnerStops(), w.kills...)
	for _, st := range stops {
		if st.Session == "" && st.Why != "SIGKILL" {
			t.Logf("owner %s: %s at %s", st.Process, st.Why, st.At.Format("15:04:05.000"))
		}
	}
	committed := map[string]bool{}
	reran := 0
	for _, s := range sessions {
		evs := w.tail.Events(s.id)
		sstops := append(harness.InterruptedStops(s.id, evs), stops...)
		byStep := harness.StepRuns(execs, s.id)
		runProc := map[string]string{} // an epoch the watcher missed: its run's process, from the exec log
		for _, ev := range evs {
			if ev.Kind != wire.EventTurnStep {
				continue
			}
			var d wire.TurnStep
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			step := fmt.Sprintf("%s/%d", d.TurnID, d.Step)
			k := s.id + "/" + step
			if committed[k] {
				t.Errorf("session %s: step %s committed twice", s.id, step)
			}
			committed[k] = true
			runs := byStep[step]
			if len(runs) == 0 {
				t.Errorf("session %s: committed step %s never ran", s.id, step)
				continue
			}
			last := runs[len(runs)-1].Process
			rec, known := epochOf[fmt.Sprintf("%s/%d", s.id, runEpoch[ev.OwnerRunID])]
			owner := rec.OwnerProcess
			if !known {
				// An epoch whose record revisions the watcher missed (see
				// check): its run is in one process, of the deployment its
				// events are stamped with, and ran each of its steps last.
				if p, ok := runProc[ev.OwnerRunID]; ok && p != last {
					t.Errorf("session %s: run %s of a missed epoch committed steps last run in %s and %s", s.id, ev.OwnerRunID, p, last)
				}
				if !strings.HasPrefix(last, ev.DeploymentID+"-") {
					t.Errorf("session %s: step %s committed by run %s stamped %s, last run in %s", s.id, step, ev.OwnerRunID, ev.DeploymentID, last)
				}
				runProc[ev.OwnerRunID], owner = last, last
			}
			if last != owner {
				t.Errorf("session %s: committed step %s (by %s) last ran in %s: %v", s.id, step, owner, last, runs)
			}
			if _, err := harness.RerunEvidence(runs, sstops); err != nil {
				t.Errorf("session %s: committed step %s (by %s): %v", s.id, step, owner, err)
			}
			if len(runs) > 1 {
				reran++
			}
		}
		for step, runs := range byStep {
			if !committed[s.id+"/"+step] {
				if err := harness.UncommittedEvidence(runs, sstops); err != nil {
					t.Errorf("session %s: %v", s.id, err)
				}
			}
		}
	}
	t.Logf("steps: %d committed, %d ran again after a stop of their earlier run", len(committed), reran)

	// SSE clients: every event once, in order, no gap, across the ingress
	// switch and the handoff; identical to the stream.
	for _, f := range followers {
		evs, connects, problems := f.Snapshot()
		if len(problems) > 0 {
			t.Errorf("SSE client of %s: %v", f.Session(), problems)
		}
		want := w.tail.Events(f.Session())
		if len(evs) != len(want) {
			t.Errorf("SSE client of %s: %d events, stream has %d", f.Session(), len(evs), len(want))
		}
		for i := range evs {
			a, b := evs[i], want[i]
			if a.Seq != b.Seq || a.Kind != b.Kind || a.OwnerRunID != b.OwnerRunID || string(a.Data) != string(b.Data) {
				t.Errorf("SSE client of %s: event %d is %+v, stream has %+v", f.Session(), i+1, a, b)
			}
		}
		if len(evs) == 0 || evs[0].DeploymentID != "blue" || evs[len(evs)-1].DeploymentID != "green" {
			t.Errorf("SSE client of %s did not follow the session from blue to green", f.Session())
		}
		if len(connects) < 2 || connects[0] != "blue" || connects[len(connects)-1] != "green" {
			t.Errorf("SSE client of %s connected to %v; want blue first, green last", f.Session(), connects)
		}
	}
	if bad := w.records.Bad(); len(bad) > 0 {
		t.Errorf("session records that do not decode: %v", bad)
	}
}

// figures logs what the upgrade did.
func (w *world) figures(sessions []*session, switchAt time.Time) {
	t := w.t
	skips := map[string]int{}
	firstTry, later, moveCmd := 0, 0, 0
	var handoffAt []time.Duration
	epochs := 0
	for _, s := range sessions {
		evs := w.tail.Events(s.id)
		skipped := false
		for _, ev := range evs {
			switch ev.Kind {
			case wire.EventHandoffSkipped:
				var d wire.HandoffSkipped
				_ = json.Unmarshal(ev.Data, &d)
				skips[d.Reason]++
				skipped = true
			case wire.EventHandoffCompleted:
				handoffAt = append(handoffAt, ev.Time.Sub(switchAt))
			}
		}
		switch {
		case s.kind == kindAsk:
			moveCmd++
		case skipped:
			later++
		default:
			firstTry++
		}
		if r, ok := w.records.Latest(s.id); ok {
			epochs += int(r.Epoch)
		}
	}
	slices.Sort(handoffAt)
	moved := 0
	for _, s := range sessions {
		hist := w.records.History(s.id)
		if len(hist) > 0 && hist[0].Rec.DeploymentID == "blue" && hist[len(hist)-1].Rec.DeploymentID == "green" {
			moved++
		}
	}
	t.Logf("sessions moved blue→green (records): %d of %d (%d at their first green delivery, %d at a later one after handoff.skipped, %d HITL by admin move); skips by reason %v; %d handoff.completed events",
		moved, len(sessions), firstTry, later, moveCmd, skips, len(handoffAt))
	if len(handoffAt) > 0 {
		t.Logf("handoff.completed after the switch: median %s, last %s; mean final epoch %.2f",
			handoffAt[len(handoffAt)/2].Round(time.Millisecond), handoffAt[len(handoffAt)-1].Round(time.Millisecond), float64(epochs)/float64(len(sessions)))
	}
	w.asyncErrors()
}

// asyncErrors logs, per process, the NATS connection's asynchronous
// errors it logged (slow consumers: a subscription that fell behind) with
// the subscriptions they concern: a loaded machine shows here first.
func (w *world) asyncErrors() {
	for name, runs := range w.procs.All() {
		for _, p := range runs {
			bySub := map[string]int{}
			for line := range strings.Lines(p.Output()) {
				if !strings.Contains(line, `"msg":"nats asynchronous error"`) {
					continue
				}
				var e struct{ Kind, Subject, Subscription string }
				_ = json.Unmarshal([]byte(line), &e)
				bySub[e.Kind+" "+e.Subscription+" "+e.Subject]++
			}
			if len(bySub) > 0 {
				w.t.Logf("%s: NATS asynchronous errors by kind, subscription and subject: %v", name, bySub)
			}
		}
	}
}

// leaseLostToPeer reports, from the logs of owner pid and its peer, that
// pid fenced itself after it last acquired its lease (no "lease acquired"
// or "lease re-acquired" after the fence) and that peer took that lease
// over (after it was acquired): pid held no lease of its own when it
// stopped.
func leaseLostToPeer(log, peerLog, pid, peer string) bool {
	var acquiredAt time.Time
	fenced := false
	for line := range strings.Lines(log) {
		var l struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Msg {
		case "fenced: stopping every session":
			fenced = true
		case "lease acquired", "lease re-acquired (still held by this run)":
			acquiredAt, fenced = l.Time, false
		}
	}
	if !fenced {
		return false
	}
	for line := range strings.Lines(peerLog) {
		var l struct {
			Time               time.Time
			Msg, Process, Dead string
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "took over the lease of a dead owner process" &&
			l.Process == peer && l.Dead == pid && l.Time.After(acquiredAt) {
			return true
		}
	}
	return false
}

// other is the other blue owner.
func other(pid string) string {
	if pid == "blue-1" {
		return "blue-2"
	}
	return "blue-1"
}
