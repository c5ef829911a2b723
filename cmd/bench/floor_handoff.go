package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// floorSide is one of the two deployments the handoff floor moves the
// session between: an owner connection of its own, as each of the bench's
// pools has, and its start subject.
type floorSide struct {
	*ownerConn
	start string
	in    jetstream.Stream
}

func newFloorSide(ctx context.Context, e *env, bucket, start string) (*floorSide, error) {
	o, err := dialOwner(ctx, e, bucket)
	if err != nil {
		return nil, err
	}
	in, err := o.js.Stream(ctx, "FLOORHIN")
	if err != nil {
		o.nc.Close()
		return nil, err
	}
	return &floorSide{ownerConn: o, start: start, in: in}, nil
}

// handoffFloor is the state one handoff hands to the next. The source's
// side holds mu until its start request, the candidate's until it has
// booted: one side at a time uses the state.
type handoffFloor struct {
	mu      sync.Mutex
	rec     []byte
	rev     uint64             // the record's revision
	trigger chan jetstream.Msg // the current consumer's next delivery
	cons    string             // the current consumer
	cc      jetstream.ConsumeContext
	epoch   int
	booted  chan time.Time // when a successor's step would start (zero: failed)
	settled chan error     // its work off the path done
}

// serve answers the start requests of handoffs to side.
func (st *handoffFloor) serve(ctx context.Context, side *floorSide) error {
	_, err := side.nc.Subscribe(side.start, func(m *nats.Msg) {
		st.mu.Lock()
		defer st.mu.Unlock()
		var marker string
		var mrev, trigSeq uint64
		if _, err := fmt.Sscanf(string(m.Data), "%s %d %d", &marker, &mrev, &trigSeq); err != nil {
			_ = m.Respond([]byte(err.Error()))
			return
		}
		if err := st.activate(ctx, side, marker, mrev); err != nil {
			_ = m.Respond([]byte(err.Error()))
			return
		}
		_ = m.Respond([]byte("ok"))
		cleanup, err := st.boot(ctx, side, trigSeq)
		if err != nil {
			st.booted <- time.Time{}
			return
		}
		st.booted <- time.Now()
		st.settled <- cleanup()
	})
	if err != nil {
		return err
	}
	return side.nc.Flush()
}

// floorHandoff is handoff_latency's floor: the trigger published and
// delivered to the source → stage CAS → marker create → backlog read →
// start request; the candidate: [the record at its revision ‖ the marker ‖
// an index write] → claim CAS → marker delete → reply; the successor:
// [its consumer's creation ‖ the trigger read by its sequence] → the boot
// commit's CAS → the consumer ready: the step would start. The
// predecessor's consumer is deleted after that, off the path, as Baton
// does.
func floorHandoff(ctx context.Context, e *env, r *bench.Reporter, recSize int) error {
	if _, _, err := floorKV(ctx, e, "floorhandoff", recSize); err != nil {
		return err
	}
	defer dropFloor(ctx, e, "floorhandoff", "FLOORHIN")
	if _, err := floorStream(ctx, e, "FLOORHIN"); err != nil {
		return err
	}
	sides := make([]*floorSide, 2)
	for i := range sides {
		s, err := newFloorSide(ctx, e, "floorhandoff", fmt.Sprintf("floor.start.%d", i))
		if err != nil {
			return err
		}
		defer s.nc.Close()
		sides[i] = s
	}
	en, err := sides[0].kv.Get(ctx, "rec")
	if err != nil {
		return err
	}
	st := &handoffFloor{rec: en.Value(), rev: en.Revision(), booted: make(chan time.Time, 1), settled: make(chan error, 1)}
	for _, s := range sides {
		if err := st.serve(ctx, s); err != nil {
			return err
		}
	}
	if err := st.successor(ctx, sides[0], 0); err != nil {
		return err
	}
	n := e.n(200)
	samples := make([]time.Duration, 0, n)
	for i := range n + 4 {
		d, err := st.handoff(ctx, sides[i%2], sides[(i+1)%2], i)
		if err != nil {
			return err
		}
		if i >= 4 {
			samples = append(samples, d)
		}
	}
	r.Latencies("handoff_floor", samples, 0, bench.Baseline("kv_cas_update"))
	return nil
}

// handoff moves the session from src to dst once and returns the time
// from the trigger's publish to the successor's step.
func (st *handoffFloor) handoff(ctx context.Context, src, dst *floorSide, i int) (time.Duration, error) {
	st.mu.Lock()
	locked := true
	defer func() {
		if locked {
			st.mu.Unlock()
		}
	}()
	t0 := time.Now()
	ack, err := src.js.Publish(ctx, "FLOORHIN.s", []byte(`{"kind":"deliver","text":"floor"}`))
	if err != nil {
		return 0, err
	}
	select {
	case m := <-st.trigger:
		_ = m.Ack()
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("handoff floor: the trigger was not delivered")
	}
	if st.rev, err = src.kv.Update(ctx, "rec", st.rec, st.rev); err != nil { // stage
		return 0, err
	}
	marker := fmt.Sprintf("m%d", i)
	mrev, err := src.kv.Create(ctx, marker, make([]byte, 200))
	if err != nil {
		return 0, err
	}
	if _, err := src.in.GetMsg(ctx, ack.Sequence+1, jetstream.WithGetMsgSubject("FLOORHIN.s")); err == nil {
		return 0, fmt.Errorf("handoff floor: a backlog")
	}
	req := fmt.Sprintf("%s %d %d", marker, mrev, ack.Sequence)
	st.mu.Unlock()
	locked = false
	if m, err := src.nc.Request(dst.start, []byte(req), 10*time.Second); err != nil || string(m.Data) != "ok" {
		return 0, fmt.Errorf("handoff floor: start: %v", err)
	}
	booted := <-st.booted
	if booted.IsZero() {
		return 0, fmt.Errorf("handoff floor: the successor did not boot")
	}
	if err := <-st.settled; err != nil { // before the next handoff, as the bench's turns settle
		return 0, err
	}
	return booted.Sub(t0), nil
}

// activate is the candidate: its three reads and writes at once, the claim
// CAS, the marker's delete.
func (st *handoffFloor) activate(ctx context.Context, dst *floorSide, marker string, mrev uint64) error {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); _, errs[0] = dst.kv.GetRevision(ctx, "rec", st.rev) }()
	go func() { defer wg.Done(); _, errs[1] = dst.kv.Get(ctx, marker) }()
	go func() { defer wg.Done(); _, errs[2] = dst.kv.Put(ctx, "index", make([]byte, 100)) }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var err error
	if st.rev, err = dst.kv.Update(ctx, "rec", st.rec, st.rev); err != nil { // claim
		return err
	}
	return dst.kv.Delete(ctx, marker, jetstream.LastRevision(mrev))
}

// boot is the successor: its consumer and the trigger's read at once, the
// boot commit's CAS, the consumer awaited (its first pull is out). What it
// returns is the work off the path: the predecessor's delete.
func (st *handoffFloor) boot(ctx context.Context, dst *floorSide, trigSeq uint64) (func() error, error) {
	created := make(chan error, 1)
	prev, prevCC := st.cons, st.cc
	go func() { created <- st.successor(ctx, dst, trigSeq+1) }()
	if _, err := dst.in.GetMsg(ctx, trigSeq); err != nil {
		return nil, err
	}
	var err error
	if st.rev, err = dst.kv.Update(ctx, "rec", st.rec, st.rev); err != nil { // boot commit
		return nil, err
	}
	if err := <-created; err != nil {
		return nil, err
	}
	return func() error {
		if prev == "" {
			return nil
		}
		prevCC.Stop()
		return dst.js.DeleteConsumer(ctx, "FLOORHIN", prev)
	}, nil
}

// successor creates the next consumer (from seq; 0: new messages only),
// configured and consumed as the owner's inbox cursor is, one message per
// pull.
func (st *handoffFloor) successor(ctx context.Context, side *floorSide, seq uint64) error {
	st.epoch++
	cfg := cursorConfig(fmt.Sprintf("floor-%d", st.epoch), "FLOORHIN.s", seq)
	cons, err := side.js.CreateConsumer(ctx, "FLOORHIN", cfg)
	if err != nil {
		return err
	}
	trig := make(chan jetstream.Msg, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) { trig <- m }, cursorPull()...)
	if err != nil {
		return err
	}
	st.cons, st.cc, st.trigger = cfg.Durable, cc, trig
	return nil
}
