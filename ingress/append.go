package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The admin end of a quarantined session appends its session.ended itself:
// no owner runs the session. Like every event appended outside a commit,
// it goes at the subject's end (message ID <sessionID>/<seq>, the
// Baton-Event-Seq header and the expected last subject sequence), decided
// by leader reads, so it is appended exactly once and never leaves a gap.

// appendTries bounds the re-reads of one append that lost its expected
// sequence (a concurrent appender of the same event).
const appendTries = 5

// lastEvent reads the session's last event from the stream leader: its
// stream sequence and its event seq (0, 0 for an empty subject).
func (s *Server) lastEvent(ctx context.Context, id string) (streamSeq, seq uint64, err error) {
	m, err := kv.NewStream(s.cfg.JS, s.cfg.Names.EventsStream()).Last(ctx, s.cfg.Names.Events(id))
	if errors.Is(err, record.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	seq, err = strconv.ParseUint(m.Header.Get(wire.HeaderEventSeq), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("ingress: event %d of %s has no %s header", m.Sequence, id, wire.HeaderEventSeq)
	}
	return m.Sequence, seq, nil
}

// appendEvent appends the encoded event with seq to the session's
// subject unless the subject holds it already; it refuses to leave a gap.
func (s *Server) appendEvent(ctx context.Context, id string, seq uint64, data []byte) error {
	var err error
	for range appendTries {
		var streamSeq, last uint64
		if streamSeq, last, err = s.lastEvent(ctx, id); err != nil {
			return err
		}
		switch {
		case last >= seq:
			return nil
		case last+1 != seq:
			return fmt.Errorf("ingress: event %d of %s would follow %d: a gap", seq, id, last)
		}
		msg := nats.NewMsg(s.cfg.Names.Events(id))
		msg.Data = data
		msg.Header.Set(wire.HeaderEventSeq, strconv.FormatUint(seq, 10))
		_, err = s.cfg.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(id+"/"+strconv.FormatUint(seq, 10)),
			jetstream.WithExpectLastSequencePerSubject(streamSeq))
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("ingress: append event %d of %s: %w", seq, id, err)
}

// settleFloor makes sure the record's floor event (the session.quarantined
// its quarantine carried) is on the stream and returns the seq the next
// event takes: one past the larger of the subject's last event and the
// record's floor.
func (s *Server) settleFloor(ctx context.Context, rec record.SessionRecord) (uint64, error) {
	if len(rec.FloorEvent) > 0 && rec.EventSeqFloor > 0 {
		if err := s.appendEvent(ctx, rec.SessionID, rec.EventSeqFloor, rec.FloorEvent); err != nil {
			s.log.Warn("admin: the floor event of the session is not on its stream", "session", rec.SessionID, "err", err)
		}
	}
	_, last, err := s.lastEvent(ctx, rec.SessionID)
	if err != nil {
		return 0, err
	}
	return max(last, rec.EventSeqFloor) + 1, nil
}
