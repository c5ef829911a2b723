package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// benchPoolDrain is drain_1000 (see benchPool).
func benchPoolDrain(ctx context.Context, e *env, r *bench.Reporter) error {
	const from, to = "blue", "green"
	n := e.n(1000)
	var blue, green []*rig
	defer func() { closeRigs(append(blue, green...)) }()
	var err error
	if blue, err = newRigs(ctx, e, from, "pool-"+from, 2); err != nil {
		return err
	}
	if green, err = newRigs(ctx, e, to, "pool-"+to, 2); err != nil {
		return err
	}
	clients, err := newPoolClients(e)
	if err != nil {
		return err
	}
	defer clients.close()
	ids, err := startLoaded(clients, blue, n)
	if err != nil {
		return err
	}
	blueSpread := loadedCounts(blue, ids)
	sw := newPoolSwitch(ids, blue, green, clients, from, to)
	if err := sw.run(ctx); err != nil {
		return err
	}
	total := sw.last.Sub(sw.began)
	moved := countOn(ctx, blue[0], ids, to)
	if moved != n {
		return fmt.Errorf("only %d of %d records name %s after their green step started", moved, n, to)
	}
	r.Latencies("drain_1000", []time.Duration{total}, 0,
		bench.Field("sessions", n), bench.Field("sessions_moved", moved),
		bench.Field("blue_owners", len(blue)), bench.Field("green_owners", len(green)),
		bench.Field("blue_spread", joinInts(blueSpread)), bench.Field("green_spread", joinInts(sw.greenTook)),
		bench.Field("clients", poolClients), bench.Field("publish_ms", sw.published.Milliseconds()),
		bench.Field("kept", sw.kept), bench.Field("rounds", sw.rounds), bench.Field("start_retries", clients.retries.Load()))
	r.Latencies("drain_1000_per_session", sw.samples, total, bench.Baseline("kv_cas_update"),
		bench.Field("sessions_moved", moved))
	return nil
}

// countOn is how many of ids' records (leader reads) name deployment dep.
func countOn(ctx context.Context, r *rig, ids []string, dep string) int {
	n := 0
	for _, id := range ids {
		cur, err := r.store.LeaderSession(ctx, id)
		if err == nil && cur.Record.DeploymentID == dep {
			n++
		}
	}
	return n
}

// poolSwitch is drain_1000's traffic switch: every session of from gets a
// delivery accepted by to, published as the ingress publishes it, and the
// step it starts is timed on whichever rig runs it.
type poolSwitch struct {
	ids         []string
	blue, green []*rig
	watch       []*rig // green, then blue: a rig index < len(green) is green's
	clients     *poolClientSet
	from, to    string

	began     time.Time       // the first publish
	published time.Duration   // began → the first round all published
	first     []time.Time     // per session, its first delivery's publish
	samples   []time.Duration // per session moved, first publish → green step start
	greenTook []int           // per green rig, the sessions it took
	last      time.Time       // the last green step start
	kept      int             // deliveries the source ran itself
	rounds    int
}

func newPoolSwitch(ids []string, blue, green []*rig, clients *poolClientSet, from, to string) *poolSwitch {
	return &poolSwitch{ids: ids, blue: blue, green: green, clients: clients, from: from, to: to,
		watch:   append(append([]*rig{}, green...), blue...),
		first:   make([]time.Time, len(ids)),
		samples: make([]time.Duration, 0, len(ids)), greenTook: make([]int, len(green))}
}

// run switches every session. A handoff that ends Kept (the source runs the
// delivery itself, e.g. the start request timed out) is retried by the next
// green delivery, as traffic that switched would: up to three rounds.
func (s *poolSwitch) run(ctx context.Context) error {
	pending := make([]int, len(s.ids))
	for i := range pending {
		pending[i] = i
	}
	s.began = time.Now()
	for ; len(pending) > 0; s.rounds++ {
		if s.rounds == 3 {
			return fmt.Errorf("%d of %d sessions still on %s after %d rounds", len(pending), len(s.ids), s.from, s.rounds)
		}
		waits := make([]<-chan started, len(pending))
		err := s.clients.each(len(pending), func(client, k int) error {
			var err error
			waits[k], err = s.deliver(ctx, client, pending[k])
			return err
		})
		if err != nil {
			return err
		}
		if s.rounds == 0 {
			s.published = time.Since(s.began)
		}
		if pending, err = s.settle(ctx, pending, waits); err != nil {
			return err
		}
	}
	return nil
}

// deliver publishes session i's delivery accepted by to from client, then,
// as the ingress, wakes the session's deployment and the producer's; the
// channel tells which watched rig started its step.
func (s *poolSwitch) deliver(ctx context.Context, client, i int) (<-chan started, error) {
	id, names := s.ids[i], s.blue[0].names
	cid := nextID()
	data, err := deliverCmdFrom(s.to, cid, "switch "+cid)
	if err != nil {
		return nil, err
	}
	wait := expectAny(s.watch, cid, 60*time.Second)
	if s.first[i].IsZero() {
		s.first[i] = time.Now()
	}
	if _, err := s.clients.jss[client].Publish(ctx, names.Inbox(id), data, jetstream.WithMsgID(cid)); err != nil {
		return wait, err
	}
	wake, _ := json.Marshal(protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress})
	if err := s.clients.ncs[client].Publish(names.Wake(s.from), wake); err != nil {
		return wait, err
	}
	return wait, s.clients.ncs[client].Publish(names.Wake(s.to), wake)
}

// settle waits for each pending session's step: started on green, it is
// timed; kept on blue, it is pending again (returned). A step that never
// started fails the round.
func (s *poolSwitch) settle(ctx context.Context, pending []int, waits []<-chan started) ([]int, error) {
	var next []int
	missing := 0
	for k, w := range waits {
		i := pending[k]
		st := <-w
		switch {
		case st.rig < 0:
			missing++
			poolDiag(ctx, s.blue[0], s.ids[i], s.watch)
		case st.rig >= len(s.green):
			s.kept++
			next = append(next, i)
		default:
			s.samples = append(s.samples, st.at.Sub(s.first[i]))
			s.greenTook[st.rig]++
			if st.at.After(s.last) {
				s.last = st.at
			}
		}
	}
	if missing > 0 {
		return nil, fmt.Errorf("%d of %d deliveries started no step in 60s", missing, len(pending))
	}
	return next, nil
}
