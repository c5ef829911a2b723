package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
)

// span is a stretch of time a fault acted: an election, a NATS kill until
// the node is current again, an owner fault (see world).
type span struct{ from, to time.Time }

// lat is one accepted delivery's time from its first send to its
// command.applied.
type lat struct {
	d   time.Duration
	sid string
	a   harness.Accepted
}

// latency prints how long each accepted delivery took from its first send
// to its command.applied (the event's time): slowest and p99 as a soak
// line, then the same by the number of elections each delivery waited
// through, never asserted.
func (w *world) latency() {
	var all []lat
	for _, sid := range w.accepted.Sessions() {
		evs := w.tail.Events(sid)
		for _, a := range w.accepted.Get(sid) {
			if ev, ok := harness.Find(evs, harness.IsAppliedSeq(a.Seq)); ok && !a.Sent.IsZero() {
				all = append(all, lat{ev.Time.Sub(a.Sent), sid, a})
			}
		}
	}
	if len(all) == 0 {
		return
	}
	slices.SortFunc(all, func(a, b lat) int { return int(a.d - b.d) })
	p := func(q float64) time.Duration {
		return all[min(len(all)-1, int(q*float64(len(all))))].d.Round(time.Millisecond)
	}
	w.soakLine(fmt.Sprintf("soak: chaos: %d deliveries, delivery→command.applied p50 %s p99 %s slowest %s",
		len(all), p(0.5), p(0.99), all[len(all)-1].d.Round(time.Millisecond)))
	w.mu.Lock()
	elections := slices.Clone(w.elections)
	faults := append(slices.Clone(w.natsFaults), w.ownerFaults...)
	w.mu.Unlock()
	w.soakLine("soak: chaos: " + byElections(all, elections))
	w.soakLine("soak: chaos: " + byFaults(all, faults))
	// The 40 slowest by the time they were sent, to lay beside the faults.
	slow := slices.Clone(all[max(0, len(all)-40):])
	slices.SortFunc(slow, func(a, b lat) int { return a.a.Sent.Compare(b.a.Sent) })
	for _, l := range slow {
		w.t.Logf("slow: sent at %s, applied %s later: session %s seq %d via %s",
			l.a.Sent.Sub(w.began).Round(100*time.Millisecond), l.d.Round(100*time.Millisecond), l.sid, l.a.Seq, l.a.Via)
	}
}

// soakLine logs line, and prints it under make soak.
func (w *world) soakLine(line string) {
	w.t.Log(line)
	if testsize.Soak() {
		fmt.Println(line)
	}
}

// group is the deliveries whose wait overlapped the same number of spans:
// how many, the slowest, and the most time one of them took beyond the
// spans it overlapped.
type group struct {
	n               int
	slowest, beyond time.Duration
}

// bySpans groups the deliveries by how many spans each overlapped between
// its send and its apply, indexed by that number (nil where none).
func bySpans(all []lat, spans []span) []*group {
	groups := map[int]*group{}
	most := 0
	for _, l := range all {
		from, to := l.a.Sent, l.a.Sent.Add(l.d)
		k, in := 0, time.Duration(0)
		for _, e := range spans {
			if lo, hi := later(from, e.from), earlier(to, e.to); hi.After(lo) {
				k++
				in += hi.Sub(lo)
			}
		}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.n++
		g.slowest = max(g.slowest, l.d)
		g.beyond = max(g.beyond, l.d-in)
		most = max(most, k)
	}
	out := make([]*group, most+1)
	for k, g := range groups {
		out[k] = g
	}
	return out
}

// byElections gives, per number of elections a delivery's wait overlapped,
// the slowest delivery and the most time one of them took beyond those
// elections (what Baton added: a retry, a lease, another fault): "killing
// a node costs at most an election plus one retry".
func byElections(all []lat, elections []span) string {
	groups := bySpans(all, elections)
	parts := []string{fmt.Sprintf("%d NATS elections", len(elections))}
	for k, g := range groups {
		if g != nil {
			parts = append(parts, fmt.Sprintf("%d deliveries through %d of them: slowest %s, at most %s beyond them",
				g.n, k, g.slowest.Round(time.Millisecond), g.beyond.Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, "; ")
}

// byFaults gives, per number of faults a delivery's wait overlapped (NATS
// kills and owner faults, see world.natsFaults and ownerFaults), the
// slowest delivery: what one fault costs a delivery, and what faults
// striking one after another add up to.
func byFaults(all []lat, faults []span) string {
	groups := bySpans(all, faults)
	parts := []string{fmt.Sprintf("%d faults", len(faults))}
	for k, g := range groups {
		if g != nil {
			parts = append(parts, fmt.Sprintf("%d deliveries met %d of them: slowest %s", g.n, k, g.slowest.Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, "; ")
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
