package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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
// Baton adds (docs/performance.md, "The floors of the open goals").

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

// ownerConn is a floor's owner: a connection of its own, as the bench's
// owner pools have, apart from the ingress's and the bench's.
type ownerConn struct {
	nc *nats.Conn
	js jetstream.JetStream
	kv jetstream.KeyValue // the floor's bucket
}

func dialOwner(ctx context.Context, e *env, bucket string) (*ownerConn, error) {
	nc, err := nats.Connect(e.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var kv jetstream.KeyValue
		if kv, err = js.KeyValue(ctx, bucket); err == nil {
			return &ownerConn{nc: nc, js: js, kv: kv}, nil
		}
	}
	nc.Close()
	return nil, err
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
	owner, err := dialOwner(ctx, e, "floorhttp")
	if err != nil {
		return err
	}
	defer owner.nc.Close()
	stop, err := floorOwner(ctx, owner, rev, recSize, lean)
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
func floorOwner(ctx context.Context, o *ownerConn, rev uint64, recSize int, lean bool) (func(), error) {
	kv := o.kv
	cons, err := o.js.CreateConsumer(ctx, "FLOORIN", cursorConfig("floorowner", "FLOORIN.s", 0))
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
			ack, err := o.js.Publish(ctx, "FLOOREV.s", []byte(`{"kind":"turn.started"}`), jetstream.WithExpectLastSequencePerSubject(lastEv))
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
		if ack, err := o.js.Publish(ctx, "FLOOREV.s", m.Data(), jetstream.WithExpectLastSequencePerSubject(lastEv)); err == nil {
			lastEv = ack.Sequence
		}
	}, cursorPull()...)
	if err != nil {
		return nil, err
	}
	return func() {
		cc.Stop()
		_ = o.js.DeleteConsumer(context.WithoutCancel(ctx), "FLOORIN", "floorowner")
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
	got, closeLines, err := openLines(ctx, client, base+"/e")
	if err != nil {
		return err
	}
	defer closeLines()
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
