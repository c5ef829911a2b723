package pool

import (
	"context"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// hibernating configures quick hibernation for a test owner.
func hibernating(after time.Duration, maxLoaded int) func(*Config) {
	return func(c *Config) {
		c.HibernateAfter, c.MaxLoaded = after, maxLoaded
		c.InboxSweepInterval = 500 * time.Millisecond
	}
}

// waitHibernated waits until the record says hibernated and the session's
// consumer is gone.
func (e *env) waitHibernated(id string) record.Session {
	e.t.Helper()
	var cur record.Session
	e.Eventually(wait, "hibernation of "+id, func() bool {
		cur, _ = e.session(id)
		return cur.Record.State == record.StateHibernated && !e.ConsumerExists(cur.Record.Consumer)
	})
	return cur
}

// waitRechecked waits until id left o's memory and the inbox re-check of
// its hibernation is done: a command sent after this reaches the session
// only through a wake (sent before, the re-check can find it and claim the
// session itself).
func (e *env) waitRechecked(o *Owner, id string) {
	e.t.Helper()
	e.Eventually(wait, "the re-check of "+id+"'s hibernation", func() bool {
		r := o.reg
		r.mu.Lock()
		defer r.mu.Unlock()
		_, loaded := r.sessions[id]
		return !loaded && r.settling == 0
	})
}

// tryInboxConsumers is the number of consumers on the inbox stream (for
// goroutines other than the test's).
func (e *env) tryInboxConsumers() (int, error) {
	s, err := e.JS.Stream(e.t.Context(), e.Names.InboxStream())
	if err != nil {
		return 0, err
	}
	info, err := s.Info(e.t.Context())
	if err != nil {
		return 0, err
	}
	return info.State.Consumers, nil
}

// A quiet session hibernates (record hibernated, consumer deleted, out of
// memory, out of the process index); a command and a wake load it again by
// a fresh claim (epoch+1) at the lowest unapplied sequence.
func TestHibernateAndWake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.owner("v1", "p1", hibernating(200*time.Millisecond, 0), func(c *Config) { c.InboxSweepInterval = -1 })
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	before := e.waitHibernated(id)
	e.waitRechecked(o.Owner, id)
	if ids, _ := e.Store.ListIndex(t.Context(), "p1"); slices.Contains(ids, id) {
		t.Fatalf("a hibernated session is still in the process index: %v", ids)
	}

	e.Send(id, harness.Deliver("again"))
	e.Wake("v1", id)
	evs := e.WaitOutput(id, "again")
	after, _ := e.session(id)
	// One fresh claim, by the test's wake: epoch+1.
	if after.Record.Epoch != before.Record.Epoch+1 || after.Record.OwnerProcess != "p1" {
		t.Fatalf("woken record: epoch %d → %d, owner %q", before.Record.Epoch, after.Record.Epoch, after.Record.OwnerProcess)
	}
	e.CheckStream(evs)
	if got := harness.AppliedIDs(evs); len(got) != 2 {
		t.Fatalf("applied %v", got)
	}
	if st := o.Stats(); st.Hibernations < 1 || st.Wakes[protocol.WakeIngress] < 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The hibernate/publish race: a command published at each step of a
// hibernation (after the CAS while the consumer still delivers, after the
// consumer's deletion, after the session left memory), with its wake
// answered "running" or not at all, is applied — by the re-check alone:
// the inbox sweeper is off. Repeated with the command at a random moment.
func TestHibernatePublishRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	inject := map[string]string{} // session → the step to publish at
	var sent atomic.Int64
	faults := failpoint.New().On(failpoint.Hibernating, failpoint.Do(func(a failpoint.Args) {
		id, step := a.SessionID, a.Detail
		mu.Lock()
		at := inject[id]
		if at == step {
			delete(inject, id)
		}
		mu.Unlock()
		if at == step {
			if _, _, err := e.SendTo(context.Background(), id, harness.WithID(fmt.Sprintf("race-%s-%d", step, sent.Add(1)), harness.Deliver("race "+step))); err != nil {
				t.Error(err)
			}
			e.Wake("v1", id)
		}
	}))
	e.owner("v1", "p1", hibernating(50*time.Millisecond, 0), func(c *Config) {
		c.InboxSweepInterval, c.Failpoints = -1, faults
	})
	rounds := testsize.Pick(4, 40)
	for r := range rounds {
		for _, step := range []string{"cas", "consumer", "left"} {
			id := e.Start("v1").SessionID
			mu.Lock()
			inject[id] = step
			mu.Unlock()
			e.Send(id, harness.Deliver("first"))
			// As the ingress does: a session that hibernated before the
			// command reached it (its 50 ms idle passed first, on a loaded
			// machine) is woken; this test's sweeper is off.
			e.Wake("v1", id)
			e.WaitOutput(id, "race "+step)
			e.waitHibernated(id)
			evs := e.Events(id)
			if got := harness.AppliedIDs(evs); len(got) != 2 {
				t.Fatalf("round %d step %s: applied %v", r, step, got)
			}
			e.CheckStream(evs)
		}
	}
	// Unsynchronised: a command at a random moment around the hibernation.
	for r := range testsize.Pick(10, 100) {
		id := e.Start("v1").SessionID
		e.Send(id, harness.Deliver("first"))
		e.Wake("v1", id) // as above
		e.WaitOutput(id, "first")
		time.Sleep(time.Duration(r%10) * 15 * time.Millisecond) // a spread of moments, not synchronisation
		e.Send(id, harness.Deliver("late"))
		e.Wake("v1", id)
		evs := e.WaitOutput(id, "late")
		if got := harness.AppliedIDs(evs); len(got) != 2 {
			t.Fatalf("random round %d: applied %v", r, got)
		}
	}
}

// A session waiting for input hibernates and answers its input.response
// when it comes, days later in production, here after a few hibernation
// periods.
func TestHibernateWhileAwaitingInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", hibernating(100*time.Millisecond, 0))
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/ask colour?"))
	evs := e.WaitKind(id, wire.EventInputRequested, 1)
	req := harness.FirstData[wire.InputRequested](t, evs, wire.EventInputRequested)
	e.waitHibernated(id)
	// Not woken by the sweeper while nothing is pending.
	time.Sleep(time.Second) // several sweeps pass; nothing may load it
	if cur, _ := e.session(id); cur.Record.State != record.StateHibernated {
		t.Fatalf("a waiting session without commands was loaded: %+v", cur.Record)
	}
	e.Send(id, harness.InputResponse(req.RequestID, `"blue"`))
	e.Wake("v1", id)
	evs = e.WaitOutput(id, "input "+req.RequestID+`: "blue"`)
	e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
}

// Many sessions cycle through hibernation and wake with deliveries, input
// answers, task results and a server-fired session timer arriving while
// hibernated, on two owner processes with a loaded-session cap, while a
// third of the ingress's wakes are dropped (the inbox sweeper finds those
// sessions). Live inbox consumers never exceed the two caps; every command
// is applied exactly once; every expiring session ends by its timer.
func TestHibernateManySessions(t *testing.T) {
	t.Parallel()
	n := testsize.Pick(300, 10000)
	const maxLoaded = 50
	e := newEnv(t)
	var dropped atomic.Int64
	faults := failpoint.New().On(failpoint.DropWake, failpoint.When(func(a failpoint.Args) bool {
		h := fnv.New32a()
		h.Write([]byte(a.SessionID))
		if protocol.WakeSource(a.Detail) == protocol.WakeIngress && h.Sum32()%3 == 0 {
			dropped.Add(1)
			return true
		}
		return false
	}))
	cfg := func(c *Config) {
		c.HibernateAfter, c.MaxLoaded, c.InboxSweepInterval, c.Failpoints = 300*time.Millisecond, maxLoaded, time.Second, faults
		c.TickInterval = 100 * time.Millisecond
	}
	owners := []*owner{e.owner("v1", "p1", cfg), e.owner("v1", "p2", cfg)}

	// Consumers on the inbox stream, sampled throughout.
	stop := make(chan struct{})
	var peak atomic.Int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if c, err := e.tryInboxConsumers(); err == nil && int64(c) > peak.Load() {
				peak.Store(int64(c))
			}
		}
	})

	kind := func(i int) string {
		switch {
		case i%10 == 3:
			return "ask"
		case i%10 == 6:
			return "task"
		case i%25 == 9:
			return "expire"
		}
		return "plain"
	}
	// Each round has one deadline for all n sessions: under a loaded cap
	// the last ones are served minutes after the first, in no set order (a
	// wait per session would assume the order they are served in). Every
	// wait of a round ends at the round's deadline, so the round as a whole
	// is bounded, not each session by it.
	const roundBound = 10 * time.Minute
	var deadline time.Time
	round := func() { deadline = time.Now().Add(roundBound) }
	long := func() harness.Test {
		r := e.Test
		r.Wait = max(time.Until(deadline), time.Millisecond) // past it: one last look
		return r
	}
	began := time.Now()
	phase := func(name string) { t.Logf("%s: %s", name, time.Since(began).Round(time.Millisecond)) }
	ids := make([]string, n)
	parallel(t, n, 8, func(i int) error {
		req := protocol.StartRequest{DeploymentID: "v1"}
		if kind(i) == "expire" {
			req.Timeout = "4s"
		}
		// A start refused "unavailable" is retried, as the protocol says:
		// an owner that fenced itself on a loaded machine (a lease renewal
		// late) refuses the starts it was serving.
		for try := 1; ; try++ {
			r, err := e.Env.Start(context.Background(), req, 20*time.Second)
			if r.Error != nil && r.Error.Code == protocol.CodeUnavailable && try < 5 {
				t.Logf("start %d: %v; again", i, err)
				continue
			}
			ids[i] = r.SessionID
			return err
		}
	})
	phase("created")
	// Round 1: a delivery to each (an /ask or a /task for some); the
	// expiring ones only wait for their timer.
	parallel(t, n, 8, func(i int) error {
		if kind(i) == "expire" {
			return nil
		}
		text := fmt.Sprintf("hi %d", i)
		switch kind(i) {
		case "ask":
			text = "/ask name?"
		case "task":
			text = "/task 600ms"
		}
		if _, _, err := e.SendTo(context.Background(), ids[i], harness.WithID("r1-"+ids[i], harness.Deliver(text))); err != nil {
			return err
		}
		e.Wake("v1", ids[i])
		return nil
	})
	// Wait for round 1 everywhere, then for the sessions to hibernate.
	round()
	reqIDs := make([]string, n)
	for i, id := range ids {
		switch kind(i) {
		case "ask":
			evs := long().WaitKind(id, wire.EventInputRequested, 1)
			reqIDs[i] = harness.FirstData[wire.InputRequested](t, evs, wire.EventInputRequested).RequestID
		case "task":
			long().WaitKind(id, wire.EventTaskCompleted, 1) // the result came while hibernated or not
		case "expire":
		default:
			long().WaitApplied(id, "r1-"+id)
		}
	}
	phase("round 1 applied")
	// Round 2: answers to the asks, another delivery to the others.
	parallel(t, n, 8, func(i int) error {
		c := harness.WithID("r2-"+ids[i], harness.Deliver(fmt.Sprintf("again %d", i)))
		if kind(i) == "ask" {
			c = harness.WithID("r2-"+ids[i], harness.InputResponse(reqIDs[i], `"ada"`))
		}
		if kind(i) == "expire" {
			return nil // its timer ends it while it sleeps
		}
		if _, _, err := e.SendTo(context.Background(), ids[i], c); err != nil {
			return err
		}
		e.Wake("v1", ids[i])
		return nil
	})
	round()
	for i, id := range ids {
		var evs []wire.Event
		if kind(i) == "expire" {
			evs = long().WaitKind(id, wire.EventSessionEnded, 1)
			if d := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); d.Reason != "expired" {
				t.Fatalf("session %d ended %+v", i, d)
			}
		} else {
			evs = long().WaitApplied(id, "r2-"+id)
			if kind(i) == "ask" {
				evs = long().WaitKind(id, wire.EventTurnCompleted, 1)
			}
		}
		e.CheckStream(evs)
		for cid, c := range countApplied(evs) {
			if c != 1 {
				t.Fatalf("session %d: command %s applied %d times", i, cid, c)
			}
		}
	}
	phase("round 2 applied")
	close(stop)
	sampler.Wait()

	var hib, swept int
	for _, o := range owners {
		st := o.Stats()
		hib += int(st.Hibernations)
		swept += st.Wakes[protocol.WakeSweeper]
	}
	t.Logf("%d sessions: %d hibernations, peak %d inbox consumers (cap 2×%d), %d wakes dropped, %d sweeper wakes",
		n, hib, peak.Load(), maxLoaded, dropped.Load(), swept)
	if p := peak.Load(); p > 2*maxLoaded {
		t.Fatalf("peak %d inbox consumers exceeds the two owners' cap of %d", p, 2*maxLoaded)
	}
	if hib < n {
		t.Fatalf("%d hibernations for %d sessions", hib, n)
	}
	if dropped.Load() == 0 || swept == 0 {
		t.Fatalf("the sweeper was not exercised: %d wakes dropped, %d sweeper wakes", dropped.Load(), swept)
	}
}

// countApplied counts command.applied events per command ID.
func countApplied(evs []wire.Event) map[string]int {
	out := map[string]int{}
	applied, _ := harness.Applied(evs)
	for _, d := range applied {
		out[d.CommandID]++
	}
	return out
}

// parallel runs f(0..n-1) on workers goroutines and fails on the first
// error.
func parallel(t *testing.T, n, workers int, f func(i int) error) {
	t.Helper()
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// The owner's Prometheus metrics count what happened: a step with its
// outcome, an inbox read, a hibernation, an ingress wake that loaded the
// session, a lease renewal. No gauge counts the hibernated sessions: that
// would read records no owner runs (docs/kv-records.md, "What a sweep
// reads").
func TestOwnerMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	o := e.owner("v1", "p1", hibernating(200*time.Millisecond, 0), func(c *Config) {
		c.Registerer = reg
		c.InboxSweepInterval = -1 // only the test's wake loads the session
	})
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.waitHibernated(id)
	e.waitRechecked(o.Owner, id) // then only the test's wake loads it
	e.Send(id, harness.Deliver("again"))
	e.Wake("v1", id)
	e.WaitOutput(id, "again")
	e.Start("v1") // another session, left to hibernate
	e.Eventually(wait, "the metrics", func() bool {
		got := gather(t, reg)
		return got[`baton_owner_step_seconds{outcome="done"}`] >= 2 &&
			got["baton_owner_inbox_lag_seconds"] >= 2 &&
			got["baton_owner_hibernations_total"] >= 1 &&
			got[`baton_owner_wakes_total{outcome="loaded",source="ingress"}`] >= 1 &&
			got[`baton_owner_lease_renewals_total{result="ok"}`] >= 1 &&
			got["baton_owner_sessions_loaded"] <= 1
	})
}

// gather flattens a registry: counters and gauges by value, histograms by
// sample count, keyed name{label="value",...} in label order.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
