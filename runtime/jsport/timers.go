package jsport

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
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

// Timers is session.Timers on message schedules: the session's timer is
// a schedule on baton.sched.<sessionID> that fires a timeout command,
// carrying the timer's ID, into the session's stable inbox subject.
type Timers struct {
	JS    jetstream.JetStream
	Names subjects.Names
	// Deployment stamps the timeout command (this owner's deployment).
	Deployment string
	Now        func() time.Time
}

var _ session.Timers = Timers{}

// Arm publishes (or re-publishes, which replaces it) the session's timer.
func (t Timers) Arm(ctx context.Context, sessionID string, tm runtime.Timer) error {
	return t.arm(ctx, sessionID, t.Names.Sched(sessionID), tm)
}

// ArmDebounce publishes (or re-publishes, which replaces it) the
// session's debounce window timer, on baton.sched.<sessionID>.debounce.
func (t Timers) ArmDebounce(ctx context.Context, sessionID string, tm runtime.Timer) error {
	return t.arm(ctx, sessionID, t.Names.SchedDebounce(sessionID), tm)
}

// timeoutVersion is the inbox version a timeout command is encoded at: the
// lowest that expresses it (every version does), so an owner of an older
// build the session moves to reads the timer that fires there.
var timeoutVersion = wire.Capability{V: 1}

func (t Timers) arm(ctx context.Context, sessionID, subject string, tm runtime.Timer) error {
	data, err := wire.Encode(timeoutVersion, t.timeoutCommand(tm))
	if err != nil {
		return fmt.Errorf("jsport: encode timeout: %w", err)
	}
	at := tm.Deadline
	if earliest := t.Now().Add(minScheduleDelay); at.Before(earliest) {
		at = earliest
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(hdrScheduleTarget, t.Names.Inbox(subjects.StableToken(sessionID)))
	if _, err := t.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("jsport: arm timer of %s: %w", sessionID, err)
	}
	return nil
}

func (t Timers) timeoutCommand(tm runtime.Timer) wire.Command {
	return wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindTimeout, ID: "timeout-" + tm.ID,
		AcceptedDeploymentID: t.Deployment, AcceptedAt: t.Now().UTC(),
		Timeout: &wire.Timeout{TimerID: tm.ID, Deadline: tm.Deadline.UTC()},
	}
}

// Cancel purges the session's schedule subjects, which cancels them.
func (t Timers) Cancel(ctx context.Context, sessionID string) error {
	stream, err := t.JS.Stream(ctx, t.Names.InboxStream())
	if err != nil {
		return err
	}
	for _, subject := range []string{t.Names.Sched(sessionID), t.Names.SchedDebounce(sessionID)} {
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			return err
		}
	}
	return nil
}
