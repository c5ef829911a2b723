package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// deleteTurns is the turns of each deleted session (-delete-turns).
var deleteTurns = 100

// deleteDrivers is how many sessions take their turns at once.
const deleteDrivers = 8

// benchDelete: session_delete — the ingress's DeleteSession of an ended
// session of 100 turns (-delete-turns), the delete carried out by an
// owner over the finish subject and answered in time (Deleted, not
// Pending), beside kv_delete (a raw KV delete of the same run). It runs
// on its own names (prefix bdel): one owner of the demo agent, one
// ingress called in process (no HTTP). Each session takes its turns one
// after another (the last is the demo's /done, which ends it), and is
// deleted once its record says ended. A warm-up session of two turns is
// deleted first, untimed. The storage of the first session before and
// after its delete goes to stderr.
func benchDelete(ctx context.Context, e *env, r *bench.Reporter) error {
	if deleteTurns < 1 {
		return fmt.Errorf("-delete-turns %d: want at least 1", deleteTurns)
	}
	if err := benchKVDelete(ctx, e, r); err != nil {
		return err
	}
	names, err := subjects.New("bdel")
	if err != nil {
		return err
	}
	if _, err := topology.Ensure(ctx, e.js, topology.Config{Names: names}); err != nil {
		return err
	}
	rg, err := newDeleteRig(ctx, e, names, "bdel", "bdel-1")
	if err != nil {
		return err
	}
	defer rg.close()
	srv, err := ingress.New(ingress.Config{NC: e.nc, JS: e.js, Names: names, Deployment: rg.dep,
		InsecureDev: true, FinishWait: 30 * time.Second, Log: benchLogger()})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Ready(ctx); err != nil { // opens the ingress's topology before any timing
		return err
	}

	warm, err := rg.startSession()
	if err != nil {
		return err
	}
	if err := driveToEnd(ctx, rg, warm, 2); err != nil {
		return err
	}
	if _, err := deleteOnce(ctx, srv, warm); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	k := e.n(30)
	start := time.Now()
	ids, err := rg.startSessions(k)
	if err != nil {
		return err
	}
	if err := driveAllToEnd(ctx, rg, ids, deleteTurns); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: delete: %d sessions of %d turns ended in %s\n",
		k, deleteTurns, time.Since(start).Round(time.Millisecond))

	samples, events, blobs, size, err := timeDeletes(ctx, e, names, srv, ids)
	if err != nil {
		return err
	}
	n := float64(len(ids))
	r.Latencies("session_delete", samples, 0, bench.Baseline("kv_delete"), bench.Field("turns", deleteTurns),
		bench.Field("events", fmt.Sprintf("%.1f", events/n)), bench.Field("blobs", fmt.Sprintf("%.1f", blobs/n)),
		bench.Field("bytes", fmt.Sprintf("%.0f", size/n)))
	return nil
}

// timeDeletes deletes each ended session of ids through srv, timing each,
// and sums what they removed; the first session's storage before and
// after its delete goes to stderr.
func timeDeletes(ctx context.Context, e *env, names subjects.Names, srv *ingress.Server, ids []string) (samples []time.Duration, events, blobs, size float64, err error) {
	st, err := openStorageProbe(ctx, e, names)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	before, err := st.measure(ctx, ids[0])
	if err != nil {
		return nil, 0, 0, 0, err
	}
	samples = make([]time.Duration, 0, len(ids))
	for i, id := range ids {
		t0 := time.Now()
		d, err := deleteOnce(ctx, srv, id)
		took := time.Since(t0)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		samples = append(samples, took)
		events, blobs, size = events+float64(d.Events), blobs+float64(d.Blobs), size+float64(d.Bytes)
		if i == 0 {
			after, err := st.measure(ctx, id)
			if err != nil {
				return nil, 0, 0, 0, err
			}
			fmt.Fprintf(os.Stderr, "bench: delete storage of session %s (%d turns) before: %s\n", id, deleteTurns, before)
			fmt.Fprintf(os.Stderr, "bench: delete storage of session %s (%d turns) after:  %s\n", id, deleteTurns, after)
			fmt.Fprintf(os.Stderr, "bench: delete of session %s reported events=%d blobs=%d bytes=%d in %s\n",
				id, d.Events, d.Blobs, d.Bytes, took.Round(time.Microsecond))
		}
	}
	return samples, events, blobs, size, nil
}

// benchKVDelete: kv_delete — a raw KV Delete (a delete marker put) of a
// key holding 512 bytes, on a plain file-storage bucket of its own.
func benchKVDelete(ctx context.Context, e *env, r *bench.Reporter) error {
	b, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rawkvdel", Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	const warm = 100
	n := e.n(2000)
	val := make([]byte, 512)
	for i := range n + warm {
		if _, err := b.Put(ctx, "k"+strconv.Itoa(i), val); err != nil {
			return err
		}
	}
	samples := make([]time.Duration, 0, n)
	for i := range n + warm {
		t0 := time.Now()
		if err := b.Delete(ctx, "k"+strconv.Itoa(i)); err != nil {
			return err
		}
		if i >= warm {
			samples = append(samples, time.Since(t0))
		}
	}
	r.Latencies("kv_delete", samples, 0, bench.Field("bytes", len(val)))
	return nil
}

// deleteOnce deletes the ended session id through the ingress and wants
// it carried out (not pending) with events removed.
func deleteOnce(ctx context.Context, srv *ingress.Server, id string) (*ingress.Deleted, error) {
	res, err := srv.DeleteSession(ctx, ingress.DeleteRequest{SessionID: id})
	switch {
	case err != nil:
		return nil, fmt.Errorf("delete %s: %w", id, err)
	case res.Pending || res.Deleted == nil:
		return nil, fmt.Errorf("delete %s: pending, no owner carried it out in time", id)
	case res.Deleted.Events == 0:
		return nil, fmt.Errorf("delete %s: removed no events", id)
	}
	return res.Deleted, nil
}

// newDeleteRig is newRigFor on names of its own: an owner of deployment
// dep, process proc, running the demo agent behind the probe.
func newDeleteRig(ctx context.Context, e *env, names subjects.Names, dep, proc string) (*rig, error) {
	nc, err := nats.Connect(e.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	store, err := kv.Open(ctx, js, names)
	if err != nil {
		nc.Close()
		return nil, err
	}
	r := &rig{e: e, names: names, probe: newProbe(), nc: nc, done: make(chan error, 1), dep: dep, store: store}
	r.owner, err = pool.New(pool.Config{NC: nc, JS: js, Store: store, Names: names, Deployment: dep,
		ProcessID: proc, Agent: r.probe, Log: benchLogger()})
	if err != nil {
		nc.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.done <- r.owner.Run(runCtx) }()
	if err := r.waitServing(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// driveAllToEnd runs driveToEnd for every session, deleteDrivers at once.
func driveAllToEnd(ctx context.Context, rg *rig, ids []string, turns int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, deleteDrivers)
	for w := range deleteDrivers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				if err := driveToEnd(ctx, rg, ids[i], turns); err != nil {
					errs[w] = err
					next.Store(int64(len(ids))) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// driveToEnd gives session id turns turns, one after another: turns-1
// short texts, each answered with a message.output, then /done, which
// ends it; it returns once the record says ended. The texts name the
// session: identical histories would share their (content-addressed)
// history segments, which a delete leaves to the sessions still
// referring to them.
func driveToEnd(ctx context.Context, rg *rig, id string, turns int) error {
	for i := range turns - 1 {
		if _, err := rg.deliverTextAndWait(ctx, id, fmt.Sprintf("turn %d of session %s", i+1, id)); err != nil {
			return err
		}
	}
	cid := nextID()
	data, err := deliverCmdFrom(rg.dep, cid, "/done")
	if err != nil {
		return err
	}
	if _, err := rg.e.js.Publish(ctx, rg.names.Inbox(id), data, jetstream.WithMsgID(cid)); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := rg.store.LeaderSession(ctx, id)
		if err == nil && cur.Record.State == record.StateEnded {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("session %s never ended after /done", id)
}

// storageProbe reads what one session holds in the topology of names.
type storageProbe struct {
	names    subjects.Names
	events   jetstream.Stream
	inbox    jetstream.Stream
	state    jetstream.ObjectStore
	sessions jetstream.KeyValue
	inv      *kv.Inventory
	store    *kv.Store
}

func openStorageProbe(ctx context.Context, e *env, names subjects.Names) (*storageProbe, error) {
	p := &storageProbe{names: names}
	var err error
	if p.events, err = e.js.Stream(ctx, names.EventsStream()); err != nil {
		return nil, err
	}
	if p.inbox, err = e.js.Stream(ctx, names.InboxStream()); err != nil {
		return nil, err
	}
	if p.state, err = e.js.ObjectStore(ctx, names.StateBucket()); err != nil {
		return nil, err
	}
	if p.sessions, err = e.js.KeyValue(ctx, names.SessionsBucket()); err != nil {
		return nil, err
	}
	if p.inv, err = kv.OpenInventory(ctx, e.js, names); err != nil {
		return nil, err
	}
	if p.store, err = kv.Open(ctx, e.js, names); err != nil {
		return nil, err
	}
	return p, nil
}

// storage is what one session holds, and the totals of the stores it
// shares with the other sessions.
type storage struct {
	events, eventBytes     int64 // messages on its events subject, their payload bytes
	inbox                  int64 // messages on its inbox subject
	objects, objectBytes   int64 // objects named <id>/...
	segments, segmentBytes int64 // history segments its inventory refers to
	revisions              int   // revisions of its record kept by the bucket
	lastRevision           uint64
	tombstone              bool
	stateObjects           int64 // the state object store, all sessions
	stateBytes             uint64
	streamMsgs             uint64 // the events stream, all sessions
	streamBytes            uint64
}

func (s storage) String() string {
	return fmt.Sprintf("events=%d event_bytes=%d inbox_msgs=%d objects(<id>/...)=%d object_bytes=%d "+
		"history_segments=%d segment_bytes=%d record_revisions_kept=%d record_last_rev=%d tombstone=%t "+
		"| all sessions: state_store_objects=%d state_store_bytes=%d events_stream_msgs=%d events_stream_bytes=%d",
		s.events, s.eventBytes, s.inbox, s.objects, s.objectBytes, s.segments, s.segmentBytes,
		s.revisions, s.lastRevision, s.tombstone, s.stateObjects, s.stateBytes, s.streamMsgs, s.streamBytes)
}

func (p *storageProbe) measure(ctx context.Context, id string) (storage, error) {
	var s storage
	var err error
	if s.events, s.eventBytes, err = subjectMessages(ctx, p.events, p.names.Events(id)); err != nil {
		return s, err
	}
	if info, err := p.inbox.Info(ctx, jetstream.WithSubjectFilter(p.names.Inbox(id))); err == nil {
		s.inbox = int64(info.State.Subjects[p.names.Inbox(id)])
	} else {
		return s, err
	}
	objs, err := p.state.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return s, err
	}
	for _, o := range objs {
		s.stateObjects++
		s.stateBytes += o.Size
		if strings.HasPrefix(o.Name, id+"/") {
			s.objects, s.objectBytes = s.objects+1, s.objectBytes+int64(o.Size)
		}
	}
	segs, err := p.inv.Segments(ctx, id)
	if err != nil {
		return s, err
	}
	for _, d := range segs {
		s.segments++
		if info, err := p.state.GetInfo(ctx, d); err == nil {
			s.segmentBytes += int64(info.Size)
		}
	}
	hist, err := p.sessions.History(ctx, subjects.SessionKey(id))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return s, err
	}
	s.revisions = len(hist)
	if len(hist) > 0 {
		s.lastRevision = hist[len(hist)-1].Revision()
	}
	if cur, err := p.store.LeaderSession(ctx, id); err == nil {
		s.tombstone = cur.Record.IsDeleted()
	}
	info, err := p.events.Info(ctx)
	if err != nil {
		return s, err
	}
	s.streamMsgs, s.streamBytes = info.State.Msgs, info.State.Bytes
	return s, nil
}

// subjectMessages counts the messages of stream on subject and sums their
// payloads.
func subjectMessages(ctx context.Context, stream jetstream.Stream, subject string) (int64, int64, error) {
	c, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return 0, 0, err
	}
	var n, size int64
	for {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			return 0, 0, err
		}
		got, last := 0, false
		for m := range batch.Messages() {
			got++
			n, size = n+1, size+int64(len(m.Data()))
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				last = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return 0, 0, err
		}
		if got == 0 || last {
			return n, size, nil
		}
	}
}
