package pool

import (
	"context"
	"errors"
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

// jsTimers is session.Timers on message schedules: the session's timer is
// a schedule on baton.sched.<sessionID> that fires a timeout command,
// carrying the timer's ID, into the session's stable inbox subject.
type jsTimers struct {
	js         jetstream.JetStream
	names      subjects.Names
	deployment string
	now        func() time.Time
}

var _ session.Timers = jsTimers{}

// Arm publishes (or re-publishes, which replaces it) the session's timer.
func (t jsTimers) Arm(ctx context.Context, sessionID string, tm runtime.Timer) error {
	data, err := wire.Encode(wire.Current(), t.timeoutCommand(tm))
	if err != nil {
		return fmt.Errorf("pool: encode timeout: %w", err)
	}
	at := tm.Deadline
	if earliest := t.now().Add(minScheduleDelay); at.Before(earliest) {
		at = earliest
	}
	msg := nats.NewMsg(t.names.Sched(sessionID))
	msg.Data = data
	msg.Header.Set(hdrSchedule, "@at "+at.UTC().Format(time.RFC3339Nano))
	msg.Header.Set(hdrScheduleTarget, t.names.Inbox(subjects.StableToken(sessionID)))
	if _, err := t.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("pool: arm timer of %s: %w", sessionID, err)
	}
	return nil
}

func (t jsTimers) timeoutCommand(tm runtime.Timer) wire.Command {
	return wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindTimeout, ID: "timeout-" + tm.ID,
		AcceptedDeploymentID: t.deployment, AcceptedAt: t.now().UTC(),
		Timeout: &wire.Timeout{TimerID: tm.ID, Deadline: tm.Deadline.UTC()},
	}
}

// Cancel purges the session's schedule subject, which cancels it.
func (t jsTimers) Cancel(ctx context.Context, sessionID string) error {
	stream, err := t.js.Stream(ctx, t.names.InboxStream())
	if err != nil {
		return err
	}
	return stream.Purge(ctx, jetstream.WithPurgeSubject(t.names.Sched(sessionID)))
}

// objectStore is the part of a jetstream.ObjectStore jsBlobs uses.
type objectStore interface {
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
	GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error)
	GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error)
	Delete(ctx context.Context, name string) error
}

// jsBlobs is session.Blobs on the baton_state object store, which Run
// opens (obs returns it; nil before).
type jsBlobs struct{ obs func() objectStore }

var _ session.Blobs = jsBlobs{}

var errNoObjectStore = errors.New("pool: out-of-line content needs the state object store")

func (b jsBlobs) store() (objectStore, error) {
	obs := b.obs()
	if obs == nil {
		return nil, errNoObjectStore
	}
	return obs, nil
}

func (b jsBlobs) Put(ctx context.Context, name string, data []byte) error {
	obs, err := b.store()
	if err == nil {
		_, err = obs.PutBytes(ctx, name, data)
	}
	return err
}

func (b jsBlobs) Has(ctx context.Context, name string) (bool, error) {
	obs, err := b.store()
	if err != nil {
		return false, err
	}
	_, err = obs.GetInfo(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	}
	return false, err
}

func (b jsBlobs) Get(ctx context.Context, name string) ([]byte, error) {
	obs, err := b.store()
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s: %w", session.ErrBlobNotFound, name, err)
	}
	return data, err
}

func (b jsBlobs) Delete(ctx context.Context, name string) error {
	obs, err := b.store()
	if err != nil {
		return nil // nothing was stored
	}
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}
