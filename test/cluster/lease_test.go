package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/natsproc"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// leaseTTL is the production default: an owner fences 1.5 s after its
	// last landed renewal, well inside a 4–9 s election.
	leaseTTL = 2 * time.Second
	// wait bounds every poll.
	wait = 90 * time.Second
	// fencedMsg is the owner's log line when it fences itself.
	fencedMsg = "fenced: stopping every session"
	// pausedMsg is its line when its renewal is overdue (it pauses).
	pausedMsg = "lease not renewed in time: every session pauses until a renewal lands"
	// renewedMsg is its line when a renewal lands after a pause.
	renewedMsg = "lease renewed after a pause: every session goes on"
)

// TestLeaseAcrossElection: owner processes hold sessions with traffic
// running; the nats-server leading baton_owners is SIGKILLed, so no lease
// can be renewed until the election ends: the owners pause, and go on when
// a renewal lands or fence if their lease is gone by then. The test
// checks from the owners' execution logs that no session ran steps on two
// owners at once (a session moves from one process to another only across
// a fence of the first), that every session applies commands again, and,
// after the node restarted, that every command was applied exactly once
// and in order. It logs the pauses, the fences, the re-claims and the time
// until every session applied again.
func TestLeaseAcrossElection(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server processes and owner processes")
	}
	nOwners, nSessions, rounds := testsize.Pick(2, 3), testsize.Pick(4, 24), testsize.Pick(1, 3)
	h := harness.For(t)
	c := natsproc.Start(t, t.TempDir(), 3)
	env := h.Dial(c.URL())
	ctx := t.Context()
	h.Check(env.Ensure(ctx, topology.Config{Replicas: 3}))
	records := h.WatchRecords(env)
	bin := proctest.BuildNoRace(t, harness.OwnerPkg)
	logs := t.TempDir()
	procs := harness.NewProcs(t, 60)
	var owners []*proctest.Proc
	var pids []string
	for i := range nOwners {
		pid := fmt.Sprintf("o%d", i+1)
		pids = append(pids, pid)
		owners = append(owners, h.OwnerProc(procs, "owner "+pid, bin, harness.OwnerFlags(c.URL(), "v1", pid, logs, leaseTTL, "--replicas", "3"), wait))
	}
	execs := harness.TailExecs(ctx, logs, pids, 20*time.Millisecond)

	var ids []string
	for range nSessions {
		r, err := env.Start(ctx, protocol.StartRequest{}, 20*time.Second)
		h.Check(err)
		ids = append(ids, r.SessionID)
	}
	// traffic: about 40 commands a second in all (every session one every
	// 100 ms at the make-test size), until stop: more than a loaded
	// two-core machine applies would build a backlog that delays every
	// later marker by minutes
	every := 100 * time.Millisecond * time.Duration(max(1, nSessions/4))
	stop := make(chan struct{})
	var traffic sync.WaitGroup
	sent := map[string]int{}
	var sentMu sync.Mutex
	for _, id := range ids {
		traffic.Go(func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, _, err := env.Send(sctx, subjects.StableToken(id), harness.WithID(fmt.Sprintf("%s-t%d", id, n), harness.Deliver(fmt.Sprintf("t%d", n))))
				cancel()
				if err == nil {
					sentMu.Lock()
					sent[id]++
					sentMu.Unlock()
				}
			}
		})
	}
	marker := func(name string) time.Duration {
		t.Helper()
		began := time.Now()
		for _, id := range ids {
			// The inbox stream may be electing too (the killed node may
			// have led it): a client sends again, under the same message
			// ID, until a leader answers, as the ingress does.
			err := harness.Retry(ctx, wait, 100*time.Millisecond, leaderless, func() error {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, _, err := env.Send(sctx, subjects.StableToken(id), harness.WithID(id+"-"+name, harness.Deliver(name)))
				return err
			})
			h.Check(err)
		}
		for _, id := range ids {
			_, err := env.WaitEvents(ctx, id, wait, name, harness.OutputCommitted(name))
			h.Check(err)
		}
		return time.Since(began)
	}
	marker("warm")

	for round := range rounds {
		lead := -1
		h.Eventually(wait, "a leader of "+ownersStream, func() bool {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			i, err := c.Leader(lctx, env.JS, ownersStream)
			lead = i
			return err == nil
		})
		fencesBefore, runsBefore, pausesBefore := fences(owners), runs(records, ids), count(owners, pausedMsg)
		killed := time.Now()
		h.Check(c.Kill(lead))
		h.Eventually(wait, "a new leader of "+ownersStream, func() bool {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.Leader(lctx, env.JS, ownersStream)
			return err == nil
		})
		elected := time.Since(killed)
		// the fences (1.5 s after the last renewal) and what follows them
		// have had their time once the lease TTL passed after the election
		time.Sleep(leaseTTL)
		marker(fmt.Sprintf("after-kill-%d", round+1))
		t.Logf("soak: round %d: SIGKILL of %s (leading %s): new leader after %v; %d pauses, %d fences, %d re-claims; longest stretch without a step of any session %v",
			round+1, c.Name(lead), ownersStream, elected.Round(time.Millisecond), count(owners, pausedMsg)-pausesBefore, fences(owners)-fencesBefore,
			runs(records, ids)-runsBefore, stall(execs.All(), ids, killed).Round(time.Millisecond))

		for i, p := range owners {
			t.Logf("round %d: owner %s after the kill: %s", round+1, pids[i], timeline(p, killed))
		}

		fencesBefore, runsBefore = fences(owners), runs(records, ids)
		restarted := time.Now()
		h.Check(c.Restart(lead))
		h.Check(c.WaitReady(wait))
		back := marker(fmt.Sprintf("after-restart-%d", round+1))
		t.Logf("soak: round %d: restart of %s: every session applied a command %v after the cluster was ready; %d fences, %d re-claims; longest stretch without a step %v",
			round+1, c.Name(lead), back.Round(time.Millisecond), fences(owners)-fencesBefore, runs(records, ids)-runsBefore,
			stall(execs.All(), ids, restarted).Round(time.Millisecond))
	}
	close(stop)
	traffic.Wait()
	marker("end")

	// checks: one owner at a time per session, from the execution logs
	t.Logf("soak: %d steps ran, %d moves of a session between processes, %d fences in all", len(execs.All()), moves(execs.All()), fences(owners))
	for _, p := range problems(execs.All(), fenceTimes(owners, pids)) {
		t.Error(p)
	}
	// every command sent was applied exactly once, in order
	for _, id := range ids {
		// a read can meet a stream between leaders ("no responders")
		// while the cluster settles after the restart: read until one
		// answers
		var evs []wire.Event
		h.Eventually(wait, "the events of "+id, func() bool {
			var err error
			evs, err = env.Events(ctx, id)
			return err == nil
		})
		applied := harness.CommandIDs(h.CheckStream(evs))
		n := 0
		for _, a := range applied {
			if strings.HasPrefix(a, id+"-t") {
				n++
			}
		}
		sentMu.Lock()
		want := sent[id]
		sentMu.Unlock()
		if n < want {
			t.Errorf("session %s: %d traffic commands applied, %d acknowledged by the inbox", id, n, want)
		}
	}
	if bad := records.Bad(); len(bad) > 0 {
		t.Errorf("records that did not decode: %v", bad)
	}
}

// stall is the longest stretch since t in which some session started no
// step (the traffic gives each one a command every 100–600 ms), as the
// execution logs' reads saw it, up to each session's last step.
func stall(obs []harness.ExecObs, ids []string, t time.Time) time.Duration {
	worst := time.Duration(0)
	for _, id := range ids {
		last := t
		for _, o := range obs {
			if o.SessionID != id || o.By.Before(t) {
				continue
			}
			worst = max(worst, o.By.Sub(last))
			last = o.By
		}
	}
	return worst
}

// timeline lists an owner's lease log lines since t, each with its time
// after t.
func timeline(p *proctest.Proc, t time.Time) string {
	var out []string
	for _, line := range strings.Split(p.Output(), "\n") {
		var m struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Time.Before(t) {
			continue
		}
		switch {
		case m.Msg == fencedMsg, strings.HasPrefix(m.Msg, "lease "), m.Msg == "owner serving", m.Msg == "resume failed":
			out = append(out, fmt.Sprintf("%v %s", m.Time.Sub(t).Round(time.Millisecond), m.Msg))
		}
	}
	return strings.Join(out, "; ")
}

// fences counts the owners' fence log lines.
func fences(owners []*proctest.Proc) int { return count(owners, fencedMsg) }

// count counts the owners' log lines of msg.
func count(owners []*proctest.Proc, msg string) int {
	n := 0
	for _, p := range owners {
		n += harness.LogCount(p, msg)
	}
	return n
}

// fenceTimes lists, for each owner, the times from its JSON log at which
// it stopped starting steps for the rest of a lease period: each fence,
// and each pause (a renewal overdue by TTL − TTL/4) that ended in a fence
// rather than in a renewal. The second is the design's self-fence before
// expiry: a peer can take a dead lease over only once the server expired
// it, after the pause; the paused process learns of it only when its next
// renewal meets the peer's write, and logs its fence then, which can be
// after the peer's first step (an election that outlasts the TTL).
func fenceTimes(owners []*proctest.Proc, pids []string) map[string][]time.Time {
	out := map[string][]time.Time{}
	for i, p := range owners {
		out[pids[i]] = stopTimes(p.Output())
	}
	return out
}

// stopTimes is fenceTimes of one owner's log.
func stopTimes(log string) []time.Time {
	var out []time.Time
	var paused time.Time // zero unless a pause has not ended yet
	for _, line := range strings.Split(log, "\n") {
		var m struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch m.Msg {
		case pausedMsg:
			paused = m.Time
		case renewedMsg:
			paused = time.Time{}
		case fencedMsg:
			if !paused.IsZero() {
				out = append(out, paused)
				paused = time.Time{}
			}
			out = append(out, m.Time)
		}
	}
	return out
}

// runs counts the owner runs the record watch saw claim the sessions (a
// re-claim is a new run).
func runs(rw *harness.RecordWatch, ids []string) int {
	n := 0
	for _, id := range ids {
		seen := map[string]bool{}
		for _, r := range rw.History(id) {
			if !r.Deleted && r.Rec.OwnerRunID != "" && !seen[r.Rec.OwnerRunID] {
				seen[r.Rec.OwnerRunID] = true
				n++
			}
		}
	}
	return n
}

// moves counts where a session's consecutive execution-log lines come
// from two processes (what problems checks).
func moves(obs []harness.ExecObs) int {
	last, n := map[string]string{}, 0
	for _, o := range obs {
		if p, ok := last[o.SessionID]; ok && p != o.Process {
			n++
		}
		last[o.SessionID] = o.Process
	}
	return n
}

// problems checks that each session ran its steps on one owner at a time:
// wherever a session's consecutive execution-log lines come from two
// processes, the earlier process fenced itself between the two (at or
// after the earlier line was written, at or before the later one was
// seen; a pause that ended in a fence counts from the pause, see
// fenceTimes). Lines are ordered by the read that saw them; lines of two
// processes seen by one read may be in either order, so there a fence of
// either process inside that read's window satisfies the check.
func problems(obs []harness.ExecObs, fenced map[string][]time.Time) []string {
	by := map[string][]harness.ExecObs{}
	for _, o := range obs {
		by[o.SessionID] = append(by[o.SessionID], o)
	}
	fencedIn := func(p string, from, to time.Time) bool {
		return slices.ContainsFunc(fenced[p], func(f time.Time) bool { return !f.Before(from) && !f.After(to) })
	}
	var out []string
	for id, os := range by {
		slices.SortStableFunc(os, func(a, b harness.ExecObs) int { return a.By.Compare(b.By) })
		for i := 1; i < len(os); i++ {
			a, b := os[i-1], os[i]
			if a.Process == b.Process {
				continue
			}
			ok := fencedIn(a.Process, a.NotBefore, b.By)
			if a.By.Equal(b.By) {
				ok = ok || fencedIn(b.Process, b.NotBefore, a.By)
			}
			if !ok {
				out = append(out, fmt.Sprintf("session %s: step %s ran on %s (seen %s) and step %s on %s (seen %s) with no fence of %s between",
					id, a.StepKey, a.Process, a.By.Format("15:04:05.000"), b.StepKey, b.Process, b.By.Format("15:04:05.000"), a.Process))
			}
		}
	}
	return out
}

// leaderless reports a publish that found no stream leader to answer (an
// election under way): sent again.
func leaderless(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded)
}
