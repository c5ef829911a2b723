package agents

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Agent shop has deployments v1 and v2, each with an owner and an ingress.
// Sessions created on v1 move to v2 exactly once after v2 is promoted,
// however their traffic is spread over both ingresses (the queue group of
// baton.ingress.shop.*): every ingress stamps the promoted deployment, so
// no delivery stamped v1 sends a session back. A rollback (promote v1)
// moves each exactly once more, back to v1. An ingress that stamped its
// own deployment would make sessions ping-pong between v1 and v2.
func TestPromotionMovesEachSessionOnce(t *testing.T) {
	const agent, sessions, perSession = "shop", 20, 10
	began := time.Now()
	w := newWorld(t)
	w.owner(agent, "v1", "v1-1")
	w.owner(agent, "v2", "v2-1")
	v1 := w.ingress(agent, "v1", "ingress v1")
	v2 := w.ingress(agent, "v2", "ingress v2")
	tr := w.transcript()

	ids := w.sessionsOn(v1, "v1", sessions)
	t.Logf("%d sessions on v1, each with a message answered, %s in", sessions, time.Since(began).Round(time.Millisecond))

	p := w.promoted(v1, agent, "v2")
	w.waitStamps(p.Revision, "v2", v1, v2)
	t.Logf("promoted v2 (revision %d, previous %q): both ingresses stamp it", p.Revision, p.Previous)
	servedBefore, perBefore := w.served("baton-ingress-"+agent, "deliver")
	// One delivery per session first: each finds its session idle, so each
	// asks for the handoff; then the rest, interleaved, eight at a time.
	w.waitAllDone(w.traffic(tr, agent, ids, 1, "v2"))
	w.waitAllDone(w.traffic(tr, agent, ids, perSession-1, "v2"))
	servedAfter, perAfter := w.served("baton-ingress-"+agent, "deliver")
	t.Logf("%d deliveries over baton.ingress.%s.deliver; per ingress instance %v → %v",
		servedAfter-servedBefore, agent, perBefore, perAfter)
	if servedAfter-servedBefore != sessions*perSession {
		t.Fatalf("the ingresses served %d deliveries, want %d", servedAfter-servedBefore, sessions*perSession)
	}
	for i := range perAfter {
		if perAfter[i] == perBefore[i] {
			t.Fatalf("ingress instance %d served none of the deliveries (%v → %v): the check would not see an ingress's stamp", i, perBefore, perAfter)
		}
	}
	w.movedOnce(tr, agent, ids, "v1", "v2", 1)

	// Roll back: v1 promoted again; one or two more deliveries each.
	p = w.promoted(v2, agent, "v1")
	w.waitStamps(p.Revision, "v1", v1, v2)
	t.Logf("rolled back: promoted v1 (revision %d, previous %q)", p.Revision, p.Previous)
	w.waitAllDone(w.traffic(tr, agent, ids, 1, "v1"))
	w.waitAllDone(w.traffic(tr, agent, ids[:sessions/2], 1, "v1"))
	w.movedOnce(tr, agent, ids, "v2", "v1", 2)
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}

// sessionsOn creates n sessions through the ingress at base, each with a
// first message, wants them on dep, and waits until every first turn has
// ended.
func (w *world) sessionsOn(base, dep string, n int) []string {
	w.t.Helper()
	ids := make([]string, n)
	sent := map[string][]uint64{}
	for i := range ids {
		c := w.create(base, fmt.Sprintf("hello %d", i))
		if c.DeploymentID != dep {
			w.t.Fatalf("session %d created on %s, want %s", i, c.DeploymentID, dep)
		}
		ids[i], sent[c.SessionID] = c.SessionID, []uint64{c.Seq}
	}
	w.waitAllDone(sent)
	return ids
}

// traffic sends rounds deliveries to each session over
// baton.ingress.<agent>.deliver, round by round (interleaved across
// sessions), eight requests in flight; every receipt must say stamp. It
// returns the inbox seqs of each session's deliveries.
func (w *world) traffic(tr *transcript, agent string, ids []string, rounds int, stamp string) map[string][]uint64 {
	w.t.Helper()
	type job struct {
		sid  string
		text string
	}
	jobs := make(chan job)
	go func() {
		defer close(jobs)
		for r := range rounds {
			for i, sid := range ids {
				jobs <- job{sid, fmt.Sprintf("round %d session %d", r, i)}
			}
		}
	}()
	var mu sync.Mutex
	sent, stamps, errs := map[string][]uint64{}, map[string]int{}, []error{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				r, err := w.natsDeliver(tr, agent, j.sid, j.text, true)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", j.text, err))
				} else {
					sent[j.sid] = append(sent[j.sid], r.Seq)
					stamps[r.DeploymentID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		w.t.Fatalf("%d deliveries failed, the first: %v", len(errs), errs[0])
	}
	if stamps[stamp] != rounds*len(ids) {
		// Not fatal: the handoffs these stamps caused are checked next.
		w.t.Errorf("receipts by deploymentId %v, want all %d on %s", stamps, rounds*len(ids), stamp)
	}
	return sent
}

// movedOnce checks that every session has exactly total handoff.completed
// events, the last one from → to, and that its status (over NATS) says to;
// it logs how many sessions have each count.
func (w *world) movedOnce(tr *transcript, agent string, ids []string, from, to string, total int) {
	w.t.Helper()
	hist := map[int]int{}
	var bad []string
	for i, sid := range ids {
		hs := w.handoffs(sid)
		hist[len(hs)]++
		if len(hs) != total || hs[len(hs)-1].FromDeploymentID != from || hs[len(hs)-1].ToDeploymentID != to {
			bad = append(bad, fmt.Sprintf("session %d %s: %d handoffs [%s]", i, sid, len(hs), route(hs)))
		}
		if s := w.natsStatus(tr, agent, sid, true); s.DeploymentID != to {
			bad = append(bad, fmt.Sprintf("session %d %s: status on %s, want %s", i, sid, s.DeploymentID, to))
		}
	}
	w.t.Logf("handoff.completed per session (count: sessions) %v; want %d each, the last %s→%s", hist, total, from, to)
	if len(bad) > 0 {
		w.t.Fatalf("%d problems:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	w.t.Logf("e.g. session 0 %s: [%s]", ids[0], route(w.handoffs(ids[0])))
}
