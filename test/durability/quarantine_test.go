package durability_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// A session whose step kills its owner process (/crash, os.Exit as a fatal
// runtime error would) in a pool of two owner processes, each restarted
// whenever it dies, as a supervisor would: after at most three deaths the
// session is quarantined, and from then on no process dies. The pool's
// other sessions receive commands throughout; every accepted command is
// applied once, in order, and none of them is ever quarantined. Two of them
// take quick steps, two take 200 ms steps, so that at each death some
// neighbour is mid-step there and is re-run as a suspect next to the
// culprit; one suspect at a time per process keeps its re-run apart from
// the culprit's. Repeated (2 rounds, 10 under make soak): a collateral
// quarantine would be a race.
func TestCrashingSessionQuarantined(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.bin = proctest.BuildNoRace(t, "github.com/baton-rt/baton/cmd/owner") // many process starts
	sup := c.supervise([]string{"--lease-ttl", "2s", "--quarantine-backoff", "200ms,400ms"}, "a", "b")
	healthy := make([]string, 4)
	for i := range healthy {
		healthy[i] = c.start(protocol.StartRequest{})
	}
	tr := c.traffic(map[string]load{
		healthy[0]: {"quick", 150 * time.Millisecond}, healthy[1]: {"quick", 150 * time.Millisecond},
		healthy[2]: {"/sleep 200ms", 600 * time.Millisecond}, healthy[3]: {"/sleep 200ms", 600 * time.Millisecond},
	})

	rounds := testsize.Pick(2, 10)
	for round := range rounds {
		before, began := sup.deaths(), time.Now()
		crasher := c.start(protocol.StartRequest{})
		c.send(crasher, harness.Deliver("/crash"))
		q := c.waitQuarantined(crasher)
		died := sup.deaths() - before
		t.Logf("round %d: quarantined after %d deaths in %v (attempts %d, error %q)",
			round+1, died, time.Since(began).Round(time.Millisecond), q.Quarantine.Attempts, q.Quarantine.Error)
		if died < 1 || died > 3 || q.Quarantine.Attempts != 3 || q.Quarantine.Error != record.ProcessDied {
			t.Fatalf("round %d: %d deaths, quarantine %+v", round+1, died, q.Quarantine)
		}
		if codes := sup.codes(before); slices.ContainsFunc(codes, func(code int) bool { return code != demo.CrashExitCode }) {
			t.Fatalf("round %d: exit codes %v, want %d (the /crash directive) only", round+1, codes, demo.CrashExitCode)
		}
		// The quarantined session is refused by every process (a wake each
		// way), while the others keep answering.
		c.waitWakeQuarantined(crasher)
		tr.answered(c, t)
		if n := sup.deaths(); n != before+died {
			t.Fatalf("round %d: a process died after the quarantine (%d deaths, %d before)", round+1, n, before+died)
		}
	}
	tr.stop()
	sent := tr.answered(c, t)
	sup.close()
	for _, id := range healthy {
		rec := c.record(id)
		evs := c.events(id)
		if rec.Quarantined() || harness.Count(evs, wire.EventSessionQuarantined) > 0 {
			t.Fatalf("healthy session %s quarantined: %+v", id, rec.Quarantine)
		}
		if applied := checkStream(t, evs); !slices.Equal(applied, sent[id]) {
			t.Fatalf("session %s applied %v, want %v (every accepted command once, in order)", id, applied, sent[id])
		}
	}
	t.Logf("%d rounds, %d process deaths, %d commands to %d healthy sessions", rounds, sup.deaths(), tr.total(), len(healthy))
}

// waitQuarantined waits until the session's record says quarantined.
func (c *cluster) waitQuarantined(id string) record.SessionRecord {
	c.t.Helper()
	return c.waitRecord(id, "quarantine of "+id, record.SessionRecord.Quarantined)
}

// waitWakeQuarantined sends wake requests until one is answered (a
// process may be down or starting): the answer must be quarantined.
func (c *cluster) waitWakeQuarantined(id string) {
	c.t.Helper()
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress})
	var rep protocol.WakeReply
	c.eventually("a wake of "+id+" answered", func() bool {
		msg, err := c.NC.Request(c.Names.Wake("v1"), data, 2*time.Second)
		return err == nil && json.Unmarshal(msg.Data, &rep) == nil && rep.Error == nil
	})
	if rep.Outcome != protocol.WakeQuarantined {
		c.t.Fatalf("wake of the quarantined session: %+v", rep)
	}
}

// supervisor restarts owner processes whenever they exit and counts the
// deaths.
type supervisor struct {
	c      *cluster
	mu     sync.Mutex
	exits  []int // exit codes, in order
	done   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup
}

// supervise starts owner processes pids with args and restarts each when
// it exits, until close.
func (c *cluster) supervise(args []string, pids ...string) *supervisor {
	c.t.Helper()
	s := &supervisor{c: c, done: make(chan struct{})}
	for _, pid := range pids {
		p := c.owner(pid, args...)
		s.wg.Go(func() { s.watch(pid, p, args) })
	}
	c.t.Cleanup(s.close)
	return s
}

func (s *supervisor) watch(pid string, p *proctest.Proc, args []string) {
	for {
		select {
		case <-s.done:
			return
		case <-p.Done():
		}
		s.mu.Lock()
		s.exits = append(s.exits, p.ExitCode())
		s.mu.Unlock()
		select {
		case <-s.done:
			return
		default:
		}
		next, err := proctest.Launch(s.c.t, s.c.bin, s.c.ownerArgs(pid, args...)...)
		if err != nil {
			s.c.t.Errorf("restart %s: %v", pid, err)
			return
		}
		s.c.started(pid, next)
		// Registered after the process's own kill, so it runs first: the
		// test's end stops restarting before it kills.
		s.c.t.Cleanup(s.close)
		p = next
	}
}

func (s *supervisor) deaths() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.exits)
}

// codes returns the exit codes after the first from.
func (s *supervisor) codes(from int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exits[from:])
}

func (s *supervisor) close() {
	s.closed.Do(func() { close(s.done) })
	s.wg.Wait()
}

// traffic sends one delivery after another to each session, paced, and
// remembers which were accepted.
type traffic struct {
	mu   sync.Mutex
	sent map[string][]string // accepted command IDs per session, in order
	done chan struct{}
	wg   sync.WaitGroup
}

// load is the traffic of one session: a delivery of text every every.
type load struct {
	text  string
	every time.Duration
}

// traffic starts a sender per session.
func (c *cluster) traffic(loads map[string]load) *traffic {
	tr := &traffic{sent: map[string][]string{}, done: make(chan struct{})}
	for id, l := range loads {
		tr.wg.Go(func() {
			tick := time.NewTicker(l.every)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-tr.done:
					return
				case <-tick.C:
				}
				cid := fmt.Sprintf("%s-h%d", id[len(id)-6:], n)
				if _, err := c.trySend(id, harness.WithID(cid, harness.Deliver(l.text))); err == nil {
					tr.mu.Lock()
					tr.sent[id] = append(tr.sent[id], cid)
					tr.mu.Unlock()
				}
			}
		})
	}
	c.t.Cleanup(tr.stop)
	return tr
}

func (tr *traffic) stop() {
	select {
	case <-tr.done:
	default:
		close(tr.done)
	}
	tr.wg.Wait()
}

// answered waits until every command accepted so far was applied, and
// returns the accepted IDs per session.
func (tr *traffic) answered(c *cluster, t *testing.T) map[string][]string {
	t.Helper()
	tr.mu.Lock()
	sent := map[string][]string{}
	for id, cids := range tr.sent {
		sent[id] = slices.Clone(cids)
	}
	tr.mu.Unlock()
	for id, cids := range sent {
		if len(cids) == 0 {
			continue
		}
		last := cids[len(cids)-1]
		evs := c.waitFor(id, "command "+last+" applied", func(evs []wire.Event) bool {
			return harness.Count(evs, wire.EventSessionQuarantined) > 0 || slices.ContainsFunc(evs, func(e wire.Event) bool {
				var d wire.CommandApplied
				return e.Kind == wire.EventCommandApplied && json.Unmarshal(e.Data, &d) == nil && d.CommandID == last
			})
		})
		if harness.Count(evs, wire.EventSessionQuarantined) > 0 {
			t.Fatalf("healthy session %s quarantined: %+v", id, c.record(id).Quarantine)
		}
	}
	return sent
}

func (tr *traffic) total() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, cids := range tr.sent {
		n += len(cids)
	}
	return n
}
