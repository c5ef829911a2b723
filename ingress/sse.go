package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// sseWriteTimeout bounds one write to an SSE client: a client that stops
// reading is disconnected (it resumes with Last-Event-ID).
const sseWriteTimeout = 30 * time.Second

// errEnded ends an SSE response after the session.ended event.
var errEnded = errors.New("ingress: session ended")

// events serves GET /v1/sessions/{id}/events: Server-Sent Events of the
// committed events with seq > after (?after=N, or the Last-Event-ID header
// of a reconnecting client, which wins), then live; with ?follow=false a
// JSON array of the committed events with seq > after.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return err
	}
	after, follow, err := eventsQuery(r)
	if err != nil {
		return err
	}
	a, err := s.topology(r.Context())
	if err != nil {
		return err
	}
	cur, err := a.liveRecord(r.Context(), id)
	if err != nil {
		return err
	}
	rd := &reader{stream: a.events, subject: s.cfg.Names.Events(id)}
	v := view{refs: a.refs, sessionID: id}
	if !follow {
		return s.eventArray(w, r.Context(), rd, v, after)
	}
	if endedBefore(cur.Record, after) {
		// Nothing will follow: 204 tells an EventSource not to reconnect.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return s.sse(w, r, rd, v, after)
}

// endedBefore reports an ended session whose last event the cursor has
// seen: the checkpoint's, or the operator's session.ended at the record's
// floor (an end of a quarantined session).
func endedBefore(rec record.SessionRecord, after uint64) bool {
	if rec.State != record.StateEnded {
		return false
	}
	if rec.Terminated() {
		return after >= rec.EventSeqFloor
	}
	cp, err := wire.DecodeCheckpoint(rec.Checkpoint)
	return err == nil && after >= rec.EventSeq(cp.EventSeq)
}

// eventsQuery reads ?after, Last-Event-ID and ?follow.
func eventsQuery(r *http.Request) (after uint64, follow bool, err error) {
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, false, bad("after %q: want a non-negative integer (an event seq)", clip(v))
		}
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, false, bad("Last-Event-ID %q: want a non-negative integer (an event seq)", clip(v))
		}
	}
	switch v := q.Get("follow"); v {
	case "", "true", "1":
		follow = true
	case "false", "0":
	default:
		return 0, false, bad("follow %q: want true or false", clip(v))
	}
	return after, follow, nil
}

// eventArray writes the committed events with seq > after as a JSON array
// of envelopes (as v serves them), read with direct gets.
func (s *Server) eventArray(w http.ResponseWriter, ctx context.Context, rd *reader, v view, after uint64) error {
	var buf bytes.Buffer
	buf.WriteByte('[')
	n := 0
	err := rd.readRetry(ctx, after+1, 0, func(ev event) error {
		if ev.kind == "" {
			return nil
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		buf.Write(v.envelope(ctx, ev))
		if buf.Len() < 1<<20 {
			return nil
		}
		return s.flushArray(w, &buf)
	})
	if err != nil {
		if w.Header().Get("Content-Type") != "" {
			panic(http.ErrAbortHandler) // the answer has begun; cut it short
		}
		return fail(ErrUnavailable, "read events: %v", err)
	}
	buf.WriteByte(']')
	return s.flushArray(w, &buf)
}

func (s *Server) flushArray(w http.ResponseWriter, buf *bytes.Buffer) error {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}
	_, err := w.Write(buf.Bytes())
	buf.Reset()
	return err
}

// sseStream is one SSE response: the client's position and its writer.
type sseStream struct {
	s          *Server
	w          http.ResponseWriter
	rc         *http.ResponseController
	rd         *reader
	view       view
	ctx        context.Context
	last       uint64 // seq of the last event sent (or the cursor)
	lastStream uint64 // its stream sequence, when known
	gate       liveGate
}

func (s *Server) sse(w http.ResponseWriter, r *http.Request, rd *reader, v view, after uint64) error {
	h, c, ring, err := s.hubs.join(r.Context(), v.sessionID)
	if err != nil {
		return err
	}
	defer h.leave(c)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := &sseStream{s: s, w: w, rc: http.NewResponseController(w), rd: rd, view: v, ctx: r.Context(), last: after}
	if err := st.start(ring); err != nil {
		return st.end(err)
	}
	return st.end(st.loop(c))
}

// start sends the history after the cursor: from the hub's ring when it
// reaches back far enough, else from the stream.
func (st *sseStream) start(ring []event) error {
	var pending []event
	for _, ev := range ring {
		if ev.seq > st.last {
			pending = append(pending, ev)
		}
	}
	if len(pending) == 0 {
		if err := st.catchUp(0); err != nil {
			return err
		}
	}
	if err := st.send(pending); err != nil {
		return err
	}
	return st.flush()
}

// loop forwards live events and heartbeats until the client leaves, the
// session ends or the hub stops.
func (st *sseStream) loop(c *client) error {
	tick := time.NewTicker(st.s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-st.ctx.Done():
			return nil
		case <-tick.C:
			if err := st.write([]byte(": ping\n\n")); err != nil {
				return err
			}
		case <-c.notify:
			evs, overflow, closed := c.take()
			if closed {
				return nil
			}
			if overflow {
				if err := st.catchUp(0); err != nil {
					return err
				}
			}
			if err := st.send(evs); err != nil {
				return err
			}
		}
		if err := st.flush(); err != nil {
			return err
		}
	}
}

// send emits events in seq order exactly once: older ones are skipped, and
// a hole before an event is filled from the stream first. Live events are
// sent as they come, unless the gate says their step is over.
func (st *sseStream) send(evs []event) error {
	for _, ev := range evs {
		if ev.live != nil {
			if err := st.emitLive(ev); err != nil {
				return err
			}
			continue
		}
		if ev.seq <= st.last {
			continue
		}
		if ev.seq > st.last+1 {
			if err := st.catchUp(ev.seq - 1); err != nil {
				return err
			}
		}
		if err := st.emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// catchUp sends the events after the last one up to seq to (0: the newest
// in the stream) from the stream.
func (st *sseStream) catchUp(to uint64) error {
	st.rd.pos = 0
	if st.lastStream > 0 {
		st.rd.pos = st.lastStream + 1
	}
	return st.rd.readRetry(st.ctx, st.last+1, to, st.emit)
}

// emit writes one event: id = seq, event = kind, data = the envelope (a
// message.output's out-of-line content resolved).
func (st *sseStream) emit(ev event) error {
	st.last, st.lastStream = ev.seq, ev.streamSeq
	if ev.kind == "" {
		st.s.log.Warn("event envelope does not validate; not sent", "subject", st.rd.subject, "seq", ev.seq)
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "id: %d\nevent: %s\n", ev.seq, ev.kind)
	for _, line := range bytes.Split(st.view.envelope(st.ctx, ev), []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if err := st.write(b.Bytes()); err != nil {
		return err
	}
	st.gate.durable(ev.kind, ev.data)
	if ev.kind == wire.EventSessionEnded {
		return errEnded
	}
	return nil
}

// emitLive writes one live event (no id: line), unless it is a delta of a
// step whose durable events were sent already.
func (st *sseStream) emitLive(ev event) error {
	if ev.kind == wire.EventMessageDelta && !st.gate.allow(*ev.live) {
		st.s.met.live.WithLabelValues("late").Inc()
		return nil
	}
	st.s.met.live.WithLabelValues("sent").Inc()
	return st.write(liveFrame(ev))
}

func (st *sseStream) write(b []byte) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	_, err := st.w.Write(b)
	return err
}

func (st *sseStream) flush() error { return st.rc.Flush() }

// end finishes the response: after session.ended the stream is complete.
// Errors after the header was sent cannot change the status; they end the
// response (the client resumes with Last-Event-ID).
func (st *sseStream) end(err error) error {
	if errors.Is(err, errEnded) {
		_ = st.flush()
		return nil
	}
	if err != nil && st.ctx.Err() == nil {
		st.s.log.Debug("SSE stream ended", "subject", st.rd.subject, "err", err)
	}
	return nil
}
