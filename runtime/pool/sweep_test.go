package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/nats-io/nats.go"
)

// callCounter counts the JetStream API requests and KV writes one owner
// process's connection sends, as the server sees them: a subscription on
// $JS.API.> and $KV.> receives a copy of every request, and a request's
// reply subject carries the prefix of the connection that sent it. Lease
// renewals (the process's own, on its own schedule) are left out.
type callCounter struct {
	prefix string
	mu     sync.Mutex
	on     bool
	calls  map[string]int
}

func countCalls(t *testing.T, e *env, of *nats.Conn) *callCounter {
	t.Helper()
	inbox := of.NewRespInbox()
	c := &callCounter{prefix: inbox[:strings.LastIndexByte(inbox, '.')+1], calls: map[string]int{}}
	nc := e.Peer(e.Env).NC
	for _, subj := range []string{"$JS.API.>", "$KV.>"} {
		sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
			if !strings.HasPrefix(m.Reply, c.prefix) || strings.Contains(m.Subject, ".lease.") {
				return
			}
			c.mu.Lock()
			if c.on {
				c.calls[callKind(m.Subject)]++
			}
			c.mu.Unlock()
		})
		e.Check(err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	e.Check(nc.Flush())
	return c
}

// callKind names a request by its subject without the key or session:
// "$JS.API.DIRECT.GET.KV_baton_sessions", "$KV.baton_owners.quarantined".
func callKind(subj string) string {
	parts := strings.Split(subj, ".")
	switch {
	case strings.HasPrefix(subj, "$JS.API.DIRECT.GET."), strings.HasPrefix(subj, "$JS.API.CONSUMER."):
		return strings.Join(parts[:min(len(parts), 5)], ".")
	case strings.HasPrefix(subj, "$KV."):
		return strings.Join(parts[:min(len(parts), 3)], ".")
	}
	return strings.Join(parts[:min(len(parts), 5)], ".")
}

// during counts the calls of f, once the connection's earlier requests
// have reached the counter.
func (c *callCounter) during(t *testing.T, of *nats.Conn, f func()) map[string]int {
	t.Helper()
	if err := of.Flush(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.on, c.calls = true, map[string]int{}
	c.mu.Unlock()
	f()
	if err := of.Flush(); err != nil {
		t.Fatal(err)
	}
	c.settle()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	return c.calls
}

// settle waits until the copies of the last requests reached the
// counter's connection: every consumer counted as created is counted as
// deleted (a watch f stopped may delete its consumer after f returned;
// under load that came later than a fixed 100 ms wait), then no call for
// a stretch. Bounded: an unbalanced count is then the caller's to see.
func (c *callCounter) settle() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n, balanced := total(c.calls), consumersDeleted(c.calls)
		c.mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		c.mu.Lock()
		quiet := total(c.calls) == n
		c.mu.Unlock()
		if balanced && quiet || time.Now().After(deadline) {
			return
		}
	}
}

// consumersDeleted reports whether calls deletes as many consumers of
// each stream as it creates.
func consumersDeleted(calls map[string]int) bool {
	for kind, n := range calls {
		if stream, ok := strings.CutPrefix(kind, "$JS.API.CONSUMER.CREATE."); ok && calls["$JS.API.CONSUMER.DELETE."+stream] != n {
			return false
		}
	}
	return true
}

func total(calls map[string]int) int {
	n := 0
	for _, v := range calls {
		n += v
	}
	return n
}

// TestSweepCallsDoNotGrowWithRecords: a pool of three owners, sessions
// running on them; a process that died while no peer watched its lease
// is found by its registration and adopted by one orphan sweep. Then
// 10,000 session records that no owner runs are seeded directly
// (hibernated ones of the pool's deployment, ended ones, ones of another
// deployment): one orphan sweep makes exactly the calls it made before
// them — the registrations, its own index and the quarantine index, never
// a listing or a read of the session records — and so does one inbox
// sweep (the inbox's subjects that hold commands). Hibernation scheduling
// reads nothing: each loaded session's own idle timer.
func TestSweepCallsDoNotGrowWithRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 records")
	}
	t.Parallel()
	e := newEnv(t)
	quiet := func(c *Config) {
		c.SweepInterval, c.InboxSweepInterval = time.Hour, -1 // only the test sweeps
		c.TickInterval = time.Hour                            // no purge changes the inbox meanwhile
		c.NoIndexReconciler = true                            // it reads the index every second
	}
	// The ghost runs sessions and stops before any peer runs: no lease
	// watch saw it, its index and registration stay.
	ghost := e.owner("v1", "ghost", quiet)
	var orphans []string
	for i := range 4 {
		id := e.Start("v1").SessionID
		e.Send(id, harness.Deliver(fmt.Sprintf("hello %d", i)))
		e.WaitOutput(id, fmt.Sprintf("hello %d", i))
		orphans = append(orphans, id)
	}
	e.Check(ghost.Stop())
	if pids, err := e.Store.ListProcesses(t.Context(), "v1"); err != nil || !slices.Contains(pids, "ghost") {
		t.Fatalf("registrations %v (%v), want ghost's", pids, err)
	}
	var pool []*owner
	for _, pid := range []string{"p1", "p2", "p3"} {
		pool = append(pool, e.owner("v1", pid, quiet))
	}
	p1 := pool[0]
	calls := countCalls(t, e, p1.cfg.NC)

	// One sweep adopts the ghost's sessions; the pool claims them.
	p1.sweeps.sweep(t.Context())
	for _, id := range orphans {
		e.WaitRecord(id, func(r record.SessionRecord) bool {
			return r.State == record.StateActive && slices.Contains([]string{"p1", "p2", "p3"}, r.OwnerProcess)
		})
	}
	e.Eventually(wait, "the ghost unregistered", func() bool {
		pids, err := e.Store.ListProcesses(t.Context(), "v1")
		return err == nil && !slices.Contains(pids, "ghost")
	})
	for i := range 3 {
		id := e.Start("v1").SessionID
		e.Send(id, harness.Deliver(fmt.Sprintf("more %d", i)))
		e.WaitOutput(id, fmt.Sprintf("more %d", i))
	}

	sweep := func() map[string]int {
		// Quiet first: a stretch in which the process sends no call
		// (its sessions purge their processed commands on their ticks).
		e.Eventually(wait, "a quiet connection", func() bool {
			return total(calls.during(t, p1.cfg.NC, func() { time.Sleep(300 * time.Millisecond) })) == 0
		})
		return calls.during(t, p1.cfg.NC, func() { p1.sweeps.sweep(t.Context()) })
	}
	inboxSweep := func() map[string]int {
		return calls.during(t, p1.cfg.NC, func() {
			if _, err := p1.sweeps.sweepInbox(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
	before, inboxBefore := sweep(), inboxSweep()

	seeded := seedRecords(t, e, 10000)
	after, inboxAfter := sweep(), inboxSweep()
	t.Logf("one inbox sweep: %d calls %v; with the records: %d calls %v", total(inboxBefore), inboxBefore, total(inboxAfter), inboxAfter)
	if total(inboxBefore) == 0 || !maps.Equal(inboxBefore, inboxAfter) {
		t.Fatalf("the inbox sweep's calls grew with %d records no owner runs: %v before, %v after", seeded, inboxBefore, inboxAfter)
	}
	t.Logf("one orphan sweep, %d running sessions in the pool: %d calls %v; with %d more records no owner runs: %d calls %v",
		len(orphans)+3, total(before), before, seeded, total(after), after)
	if total(before) == 0 {
		t.Fatalf("the counter saw no call of the sweep")
	}
	if !maps.Equal(before, after) {
		t.Fatalf("the sweep's calls grew with %d records no owner runs: %v before, %v after", seeded, before, after)
	}
	for kind := range after {
		if strings.Contains(kind, e.Names.SessionsBucket()) {
			t.Fatalf("the sweep read the sessions bucket (%s) though every session of this process runs here: %v", kind, after)
		}
	}
}

// seedRecords writes n session records directly: hibernated ones of v1,
// ended ones of v1 and hibernated ones of another deployment.
func seedRecords(t *testing.T, e *env, n int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				id := fmt.Sprintf("SEED%06d", i)
				cp, err := session.EncodeNew(id, nil, nil)
				if err != nil {
					errs <- err
					return
				}
				rec := record.SessionRecord{SessionID: id, DeploymentID: "v1", State: record.StateHibernated,
					Epoch: 1, WireV: 1, Writer: "seed", WriteCounter: 1, UpdatedAt: time.Now().UTC(), Checkpoint: cp}
				switch i % 3 {
				case 1:
					rec.State = record.StateEnded
				case 2:
					rec.DeploymentID = "v0"
				}
				if _, err := e.Store.CreateSession(ctx, rec); err != nil {
					errs <- fmt.Errorf("seed %s: %w", id, err)
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
	return n
}

// The pool's inbox sweepers share the listed subjects: in one round of
// the three processes each subject's hook is read once, not three times.
func TestInboxSweepSharedAcrossPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	quiet := func(c *Config) {
		c.SweepInterval, c.InboxSweepInterval = time.Hour, -1 // only the test sweeps
		c.TickInterval = time.Hour                            // no purge: the inbox keeps every command
	}
	var pool []*owner
	for _, pid := range []string{"p1", "p2", "p3"} {
		pool = append(pool, e.owner("v1", pid, quiet))
	}
	const sessions = 12
	for i := range sessions {
		id := e.Start("v1").SessionID
		e.Send(id, harness.Deliver(fmt.Sprintf("hello %d", i)))
		e.WaitOutput(id, fmt.Sprintf("hello %d", i))
	}
	for _, o := range pool {
		e.Eventually(wait, "each process sees the pool of three", func() bool {
			_, n := o.sweeps.peers.shard("v1", o.cfg.ProcessID)
			return n == 3
		})
	}
	hooks := 0
	for _, o := range pool {
		calls := countCalls(t, e, o.cfg.NC)
		got := calls.during(t, o.cfg.NC, func() {
			if _, err := o.sweeps.sweepInbox(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
		for kind, n := range got {
			if strings.Contains(kind, e.Names.HooksBucket()) {
				hooks += n
			}
		}
	}
	if hooks != sessions {
		t.Fatalf("one round of the pool's inbox sweeps read %d hooks, want %d (one per subject)", hooks, sessions)
	}
}
