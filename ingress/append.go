package ingress

import (
	"context"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// The admin end of a quarantined session appends its session.ended itself:
// no owner runs the session. It uses the owner's appender (kv.Appender):
// message ID <sessionID>/<seq>, the Baton-Event-Seq header and the expected
// last subject sequence, decided by leader reads, so the event is appended
// exactly once and never leaves a gap.

func (s *Server) appender(id string) *kv.Appender {
	return kv.NewAppender(s.cfg.JS, kv.NewStream(s.cfg.JS, s.cfg.Names.EventsStream()), s.cfg.Names.Events(id), id)
}

// appendEvent appends the encoded event with seq to the session's subject
// unless the subject holds it already; it refuses to leave a gap.
func (s *Server) appendEvent(ctx context.Context, id string, seq uint64, data []byte) error {
	return s.appender(id).Append(ctx, seq, data)
}

// settleFloor makes sure the record's floor event (the session.quarantined
// its quarantine carried) is on the stream and returns the seq the next
// event takes: one past the larger of the subject's last event and the
// record's floor.
func (s *Server) settleFloor(ctx context.Context, rec record.SessionRecord) (uint64, error) {
	app := s.appender(rec.SessionID)
	if len(rec.FloorEvent) > 0 && rec.EventSeqFloor > 0 {
		if err := app.Append(ctx, rec.EventSeqFloor, rec.FloorEvent); err != nil {
			s.log.Warn("admin: the floor event of the session is not on its stream", "session", rec.SessionID, "err", err)
		}
	}
	last, err := app.Last(ctx)
	if err != nil {
		return 0, err
	}
	return max(last, rec.EventSeqFloor) + 1, nil
}
