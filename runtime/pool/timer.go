package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message schedule headers (nats-server 2.12+).
const (
	hdrSchedule       = "Nats-Schedule"
	hdrScheduleTarget = "Nats-Schedule-Target"
	minScheduleDelay  = 300 * time.Millisecond // the server's minimum is 250 ms
)

// armTimer publishes (or re-publishes, which replaces it) the session's
// timer: a message schedule on baton.sched.<sessionID> that fires a timeout
// command, carrying the timer's ID, into the session's stable inbox subject.
func (o *Owner) armTimer(ctx context.Context, sessionID string, t runtime.Timer) error {
	data, err := wire.Encode(wire.Current(), o.timeoutCommand(t))
	if err != nil {
		return fmt.Errorf("driver: encode timeout: %w", err)
	}
	at := t.Deadline
	if earliest := o.now().Add(minScheduleDelay); at.Before(earliest) {
		at = earliest
	}
	msg := nats.NewMsg(o.cfg.Names.Sched(sessionID))
	msg.Data = data
	msg.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(hdrScheduleTarget, o.cfg.Names.Inbox(subjects.StableToken(sessionID)))
	if _, err := o.cfg.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("driver: arm timer of %s: %w", sessionID, err)
	}
	return nil
}

func (o *Owner) timeoutCommand(t runtime.Timer) wire.Command {
	return wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindTimeout, ID: "timeout-" + t.ID,
		AcceptedDeploymentID: o.cfg.Deployment, AcceptedAt: o.now().UTC(),
		Timeout: &wire.Timeout{TimerID: t.ID, Deadline: t.Deadline.UTC()},
	}
}

// cancelTimer purges the session's schedule subject, which cancels it.
func (o *Owner) cancelTimer(ctx context.Context, sessionID string) {
	stream, err := o.cfg.JS.Stream(ctx, o.cfg.Names.InboxStream())
	if err == nil {
		err = stream.Purge(ctx, jetstream.WithPurgeSubject(o.cfg.Names.Sched(sessionID)))
	}
	if err != nil {
		o.log.Warn("cancel timer failed", "session", sessionID, "err", err)
	}
}
