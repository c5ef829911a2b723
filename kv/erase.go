package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Eraser removes what a deleted session stored outside the records and the
// object store (docs/api.md, "Deleting a session"): its events, its
// commands and timer schedules, its journal entries and idempotency
// receipts, and the older revisions of its record. Each removal is a
// purge by subject — no marker stays — and is idempotent, so a delete that
// died half way is repeated whole.
type Eraser struct {
	js    jetstream.JetStream
	names subjects.Names
}

// NewEraser returns the eraser of the streams and buckets named by names.
func NewEraser(js jetstream.JetStream, names subjects.Names) Eraser {
	return Eraser{js: js, names: names}
}

// purge removes the messages of stream on subject (a wildcard may end
// it) below seq (0: all); a stream that does not exist holds nothing.
func (e Eraser) purge(ctx context.Context, stream, subject string, below uint64) error {
	_, err := retry(ctx, func() (struct{}, error) {
		s, err := e.js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return struct{}{}, nil
		}
		if err != nil {
			return struct{}{}, err
		}
		opts := []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(subject)}
		if below > 0 {
			opts = append(opts, jetstream.WithPurgeSequence(below))
		}
		return struct{}{}, s.Purge(ctx, opts...)
	})
	if err != nil {
		return fmt.Errorf("kv: purge %s in %s: %w", subject, stream, err)
	}
	return nil
}

// Events purges the session's event stream subject.
func (e Eraser) Events(ctx context.Context, sessionID string) error {
	return e.purge(ctx, e.names.EventsStream(), e.names.Events(sessionID), 0)
}

// Inbox purges the inbox subject of token below seq (0: every command):
// an alias the session held may carry the commands of a session that took
// it over, above the deleted one's last.
func (e Eraser) Inbox(ctx context.Context, token string, below uint64) error {
	return e.purge(ctx, e.names.InboxStream(), e.names.Inbox(token), below)
}

// Schedules purges the session's timer schedule subject and every subject
// under it.
func (e Eraser) Schedules(ctx context.Context, sessionID string) error {
	sched := e.names.Sched(sessionID)
	if err := e.purge(ctx, e.names.InboxStream(), sched, 0); err != nil {
		return err
	}
	return e.purge(ctx, e.names.InboxStream(), sched+".>", 0)
}

// Journal purges the session's journal entries.
func (e Eraser) Journal(ctx context.Context, sessionID string) error {
	b := e.names.JournalBucket()
	return e.purge(ctx, "KV_"+b, subjects.KVSubject(b, sessionID+".>"), 0)
}

// Receipts purges the session's idempotency receipts (the ingress creates
// their bucket on first use; one never created holds none).
func (e Eraser) Receipts(ctx context.Context, sessionID string) error {
	bucket := e.names.ReceiptsBucket()
	return e.purge(ctx, "KV_"+bucket, subjects.KVSubject(bucket, sessionID+".>"), 0)
}

// RecordHistory purges every revision of the session's record but the
// last: the tombstone stays, what the session held before goes.
func (e Eraser) RecordHistory(ctx context.Context, sessionID string) error {
	b := e.names.SessionsBucket()
	_, err := retry(ctx, func() (struct{}, error) {
		s, err := e.js.Stream(ctx, "KV_"+b)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, s.Purge(ctx, jetstream.WithPurgeSubject(subjects.KVSubject(b, sessionID)), jetstream.WithPurgeKeep(1))
	})
	if err != nil {
		return fmt.Errorf("kv: purge the older revisions of %s: %w", sessionID, err)
	}
	return nil
}
