package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The floors: the JetStream operations a Baton figure's path must do, done
// raw by this program in the same order (what can overlap overlaps), with
// a record of the size the figure's session had, and nothing else — no
// encoding, no checks, no machine. A figure cannot be faster than its
// floor while it keeps its protocol: the distance between them is what
// Baton adds (docs/performance.md, "The floors").

// recordBytes is the size of a session's record as stored now.
func recordBytes(ctx context.Context, e *env, id string) (int, error) {
	kv, err := e.js.KeyValue(ctx, subjects.Default().SessionsBucket())
	if err != nil {
		return 0, err
	}
	en, err := kv.Get(ctx, subjects.SessionKey(id))
	if err != nil {
		return 0, err
	}
	return len(en.Value()), nil
}

// recordSizes samples a session's record size every tenth turn of a
// figure, between turns (off its clock).
type recordSizes struct{ sum, n int }

func (s *recordSizes) sample(ctx context.Context, e *env, id string, i int) error {
	if i%10 != 0 {
		return nil
	}
	b, err := recordBytes(ctx, e, id)
	s.sum, s.n = s.sum+b, s.n+1
	return err
}

func (s *recordSizes) mean() int { return s.sum / max(s.n, 1) }

// floorKV creates a file-stored raw bucket holding key "rec" of size n.
func floorKV(ctx context.Context, e *env, bucket string, n int) (jetstream.KeyValue, uint64, error) {
	kv, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 8, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, 0, err
	}
	rev, err := kv.Put(ctx, "rec", make([]byte, n))
	return kv, rev, err
}

// dropFloor deletes a floor's bucket and streams, so that the suites after
// it find the server as it was.
func dropFloor(ctx context.Context, e *env, bucket string, streams ...string) {
	ctx = context.WithoutCancel(ctx)
	_ = e.js.DeleteKeyValue(ctx, bucket)
	for _, s := range streams {
		_ = e.js.DeleteStream(ctx, s)
	}
}

// floorStream creates a file-stored raw stream that allows direct gets.
func floorStream(ctx context.Context, e *env, name string) (jetstream.Stream, error) {
	return e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, AllowDirect: true, MaxConsumers: 100_000,
	})
}

// floorHTTP reports http_delivery_to_event's floors. http_floor: POST over
// loopback HTTP → the record read → the inbox publish → 202; the owner's
// pull delivers the command → its admission CAS → the admission event's
// append (beside the step, which does nothing) → the result CAS after that
// append → the output event's append; a consumer on the events delivers
// it → an SSE line → the client reads it. http_floor_min leaves out what
// the protocol could: the ingress's read, and the result CAS's wait for
// the admission's append (only the appends stay in order).
func floorHTTP(ctx context.Context, e *env, r *bench.Reporter, recSize int) error {
	for _, lean := range []bool{false, true} {
		if err := floorHTTPOnce(ctx, e, r, recSize, lean); err != nil {
			return err
		}
	}
	return nil
}

func floorHTTPOnce(ctx context.Context, e *env, r *bench.Reporter, recSize int, lean bool) error {
	kv, rev, err := floorKV(ctx, e, "floorhttp", recSize)
	if err != nil {
		return err
	}
	defer dropFloor(ctx, e, "floorhttp", "FLOORIN", "FLOOREV")
	for _, s := range []string{"FLOORIN", "FLOOREV"} {
		if _, err := floorStream(ctx, e, s); err != nil {
			return err
		}
	}
	stop, err := floorOwner(ctx, e, kv, rev, recSize, lean)
	if err != nil {
		return err
	}
	defer stop()
	lines := make(chan string, 64)
	hub, err := e.js.OrderedConsumer(ctx, "FLOOREV", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"FLOOREV.s"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	hc, err := hub.Consume(func(m jetstream.Msg) { lines <- string(m.Data()) })
	if err != nil {
		return err
	}
	defer hc.Stop()
	base, closeHTTP, err := floorServer(ctx, e, kv, lines, lean)
	if err != nil {
		return err
	}
	defer closeHTTP()
	name := "http_floor"
	if lean {
		name = "http_floor_min"
	}
	return floorHTTPClient(ctx, e, r, base, name)
}

// floorOwner consumes FLOORIN.s and does a turn's writes for each command.
func floorOwner(ctx context.Context, e *env, kv jetstream.KeyValue, rev uint64, recSize int, lean bool) (func(), error) {
	cons, err := e.js.CreateConsumer(ctx, "FLOORIN", cursorConfig("floorowner", "FLOORIN.s", 0))
	if err != nil {
		return nil, err
	}
	rec := make([]byte, recSize)
	var lastEv uint64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		var err error
		if rev, err = kv.Update(ctx, "rec", rec, rev); err != nil {
			return // the client times out
		}
		admitted := make(chan error, 1)
		go func() {
			ack, err := e.js.Publish(ctx, "FLOOREV.s", []byte(`{"kind":"turn.started"}`), jetstream.WithExpectLastSequencePerSubject(lastEv))
			if err == nil {
				lastEv = ack.Sequence
			}
			admitted <- err
		}()
		if !lean && <-admitted != nil {
			return
		}
		if rev, err = kv.Update(ctx, "rec", rec, rev); err != nil {
			return
		}
		if lean && <-admitted != nil {
			return
		}
		if ack, err := e.js.Publish(ctx, "FLOOREV.s", m.Data(), jetstream.WithExpectLastSequencePerSubject(lastEv)); err == nil {
			lastEv = ack.Sequence
		}
	}, cursorPull()...)
	if err != nil {
		return nil, err
	}
	return func() {
		cc.Stop()
		_ = e.js.DeleteConsumer(context.WithoutCancel(ctx), "FLOORIN", "floorowner")
	}, nil
}

// floorServer serves POST /d (read, publish, 202) and GET /e (the lines
// as SSE).
func floorServer(ctx context.Context, e *env, kv jetstream.KeyValue, lines <-chan string, lean bool) (string, func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /d", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !lean {
			if _, err := kv.Get(req.Context(), "rec"); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if _, err := e.js.Publish(req.Context(), "FLOORIN.s", body); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /e", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		f.Flush()
		for {
			select {
			case <-req.Context().Done():
				return
			case l := <-lines:
				fmt.Fprintf(w, "data: %s\n\n", l)
				f.Flush()
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}

func floorHTTPClient(ctx context.Context, e *env, r *bench.Reporter, base, name string) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/e", nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	n := e.n(300)
	samples := make([]time.Duration, 0, n)
	for i := range n + 10 {
		text := fmt.Sprintf(`{"text":"floor-%d"}`, i)
		t0 := time.Now()
		if code, b, err := post(client, base+"/d", text); err != nil || code != http.StatusAccepted {
			return fmt.Errorf("floor delivery: %d %s %v", code, b, err)
		}
		if err := waitLine(got, text); err != nil {
			return err
		}
		if i >= 10 {
			samples = append(samples, time.Since(t0))
		}
	}
	r.Latencies(name, samples, 0, bench.Baseline("js_publish_sync"))
	return nil
}

// floorSide is one of the two deployments the handoff floor moves the
// session between: its own connection, as each of the bench's pools has.
type floorSide struct {
	start string // its start subject
	nc    *nats.Conn
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	in    jetstream.Stream
}

func newFloorSide(ctx context.Context, e *env, bucket, start string) (*floorSide, error) {
	nc, err := nats.Connect(e.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	in, err := js.Stream(ctx, "FLOORHIN")
	if err != nil {
		return nil, err
	}
	return &floorSide{start: start, nc: nc, js: js, kv: kv, in: in}, nil
}

// handoffFloor is the state one handoff hands to the next.
type handoffFloor struct {
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

// cursorConfig is a consumer configured as the owner's inbox cursor is
// (runtime/jsport): from seq (0: new messages only), one message
// unacknowledged at most, its state in memory.
func cursorConfig(name, filter string, seq uint64) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{Durable: name, FilterSubjects: []string{filter},
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second, MaxAckPending: 1,
		DeliverPolicy: jetstream.DeliverNewPolicy, InactiveThreshold: 10 * time.Minute, MemoryStorage: true, Replicas: 1}
	if seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq
	}
	return cfg
}

// cursorPull consumes as the owner's inbox reader does: one message per
// pull.
func cursorPull() []jetstream.PullConsumeOpt {
	return []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(1), jetstream.PullExpiry(5 * time.Second),
		jetstream.PullHeartbeat(time.Second)}
}

// floorStepStart is delivery_to_step_start_<loops>'s floor: as many raw
// loops at once, each a session's turn with the figure's harness: a
// subscription to the session's events, the command published (with its
// message ID) and delivered to a cursor-like consumer, acknowledged, the
// admission CAS — the step would start: the sample ends — then the rest
// of the turn before the next: the admission event's append, the result
// CAS, the result's five events, seen on the subscription.
func floorStepStart(ctx context.Context, e *env, r *bench.Reporter, loops, recSize int) error {
	kv, _, err := floorKV(ctx, e, "floorstep", recSize)
	if err != nil {
		return err
	}
	defer dropFloor(ctx, e, "floorstep", "FLOORSIN", "FLOORSEV")
	for _, s := range []string{"FLOORSIN", "FLOORSEV"} {
		if _, err := floorStream(ctx, e, s); err != nil {
			return err
		}
	}
	per := max(e.n(2000)/loops, 20)
	var mu sync.Mutex
	var samples []time.Duration
	errs := make([]error, loops)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range loops {
		wg.Go(func() {
			got, err := floorTurns(ctx, e, kv, i, per, recSize)
			mu.Lock()
			samples, errs[i] = append(samples, got...), err
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Latencies(fmt.Sprintf("step_start_floor_%d", loops), samples, time.Since(start),
		bench.Baseline(fmt.Sprintf("js_publish_consume_rtt_%d", loops)), bench.Field("record_bytes", recSize))
	return nil
}

// floorTurns runs per+5 turns of loop i (the first five are warm-up) and
// returns the measured publish → admission samples.
func floorTurns(ctx context.Context, e *env, kv jetstream.KeyValue, i, per, recSize int) ([]time.Duration, error) {
	key, in, ev := fmt.Sprintf("s%d", i), fmt.Sprintf("FLOORSIN.%d", i), fmt.Sprintf("FLOORSEV.%d", i)
	rec := make([]byte, recSize)
	rev, err := kv.Put(ctx, key, rec)
	if err != nil {
		return nil, err
	}
	cons, err := e.js.CreateConsumer(ctx, "FLOORSIN", cursorConfig(fmt.Sprintf("fs%d", i), in, 0))
	if err != nil {
		return nil, err
	}
	got := make(chan jetstream.Msg, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) { got <- m }, cursorPull()...)
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	var lastEv uint64
	event := make([]byte, 250)
	samples := make([]time.Duration, 0, per)
	for t := range per + 5 {
		seen := make(chan struct{}, 8)
		sub, err := e.nc.Subscribe(ev, func(*nats.Msg) { seen <- struct{}{} })
		if err != nil {
			return samples, err
		}
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, in, make([]byte, 300), jetstream.WithMsgID(fmt.Sprintf("%d-%d", i, t))); err != nil {
			return samples, err
		}
		m := <-got
		_ = m.Ack()
		if rev, err = kv.Update(ctx, key, rec, rev); err != nil { // admission
			return samples, err
		}
		if t >= 5 {
			samples = append(samples, time.Since(t0))
		}
		if lastEv, err = floorAppend(ctx, e, ev, event, 1, lastEv); err != nil {
			return samples, err
		}
		if rev, err = kv.Update(ctx, key, rec, rev); err != nil { // result
			return samples, err
		}
		if lastEv, err = floorAppend(ctx, e, ev, event, 5, lastEv); err != nil {
			return samples, err
		}
		for range 6 {
			<-seen
		}
		_ = sub.Unsubscribe()
	}
	return samples, nil
}

// floorAppend appends n events to subject after last (the first expects
// it, as a fenced batch does; the rest are pipelined) and returns the
// subject's new last sequence.
func floorAppend(ctx context.Context, e *env, subject string, data []byte, n int, last uint64) (uint64, error) {
	acks := make([]jetstream.PubAckFuture, n)
	for k := range n {
		var opts []jetstream.PublishOpt
		if k == 0 {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last))
		}
		f, err := e.js.PublishAsync(subject, data, opts...)
		if err != nil {
			return last, err
		}
		acks[k] = f
	}
	for _, f := range acks {
		select {
		case ack := <-f.Ok():
			last = ack.Sequence
		case err := <-f.Err():
			return last, err
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
	return last, nil
}
