package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// headerRoom is reserved below a bucket's maximum value size for the headers
// of a CAS write (Nats-Expected-Last-Subject-Sequence, Nats-TTL), which the
// server counts against the limit.
const headerRoom = 128

// Store is the typed store over Baton's three KV buckets. It holds no
// mutable state and is safe for concurrent use.
type Store struct {
	js       jetstream.JetStream
	sessions bucket
	hooks    bucket
	owners   bucket
	minTTL   time.Duration // shortest lease TTL the owners bucket honours
	now      func() time.Time
	markers  *markerHints // the delete markers this process left on marker keys
}

// bucket is one KV bucket with what kv learned about it at Open.
type bucket struct {
	kv        jetstream.KeyValue
	name      string
	leader    leader        // leader reads of its stream
	maxValue  int           // largest value accepted, headers excluded; 0 = unbounded
	history   int64         // revisions kept per key
	markerTTL time.Duration // TTL of delete markers (0 = no per-key TTL)
}

// entry is one stored KV message, read through the KV API or from the leader.
type entry struct {
	key  string
	rev  uint64
	op   jetstream.KeyValueOp
	data []byte
}

// live reports whether the entry is a value, not a delete/purge/expiry marker.
func (e entry) live() bool { return e.op == jetstream.KeyValuePut }

// Open opens the sessions, hooks and owners buckets named by names. They
// must exist (topology.Ensure creates them); the owners bucket must allow
// per-key TTLs (LimitMarkerTTL), which leases need.
func Open(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Store, error) {
	if names == (subjects.Names{}) {
		return nil, invalid("zero subjects.Names (use subjects.Default or subjects.New)")
	}
	s := &Store{js: js, now: func() time.Time { return time.Now().UTC() }, markers: &markerHints{}}
	for _, b := range []struct {
		dst  *bucket
		name string
	}{{&s.sessions, names.SessionsBucket()}, {&s.hooks, names.HooksBucket()}, {&s.owners, names.OwnersBucket()}} {
		var err error
		if *b.dst, err = openBucket(ctx, js, b.name); err != nil {
			return nil, err
		}
	}
	if s.owners.markerTTL <= 0 {
		return nil, fmt.Errorf("kv: bucket %s has no LimitMarkerTTL, so leases cannot carry a per-key TTL (create it with topology.Ensure)", s.owners.name)
	}
	s.minTTL = minLeaseTTL(s.owners)
	return s, nil
}

// minLeaseTTL is the shortest per-key TTL the owners bucket honours. A
// stream with subject delete markers raises every message TTL below the
// marker TTL up to it, unless it keeps one message per subject (nats-server
// 2.15.2 stream.go, processJetStreamMsg: "If subject delete markers are
// used, ensure message TTL is that at minimum ... MaxMsgsPer=1 is an
// exception"). So with History > 1 a 2 s lease would silently live for the
// marker TTL (5 min by default); kv refuses such a TTL instead.
func minLeaseTTL(b bucket) time.Duration {
	if b.history == 1 {
		return MinLeaseTTL
	}
	return max(MinLeaseTTL, b.markerTTL)
}

func openBucket(ctx context.Context, js jetstream.JetStream, name string) (bucket, error) {
	h, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return bucket{}, fmt.Errorf("kv: bucket %s does not exist (create it with topology.Ensure): %w", name, err)
	}
	if err != nil {
		return bucket{}, fmt.Errorf("kv: open bucket %s: %w", name, err)
	}
	st, err := h.Status(ctx)
	if err != nil {
		return bucket{}, fmt.Errorf("kv: bucket %s status: %w", name, err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return bucket{}, fmt.Errorf("kv: bucket %s: unexpected status type %T", name, st)
	}
	cfg := bs.StreamInfo().Config
	b := bucket{kv: h, name: name, leader: newLeader(js, cfg.Name),
		history: cfg.MaxMsgsPerSubject, markerTTL: cfg.SubjectDeleteMarkerTTL}
	if cfg.MaxMsgSize > headerRoom {
		b.maxValue = int(cfg.MaxMsgSize) - headerRoom
	}
	return b, nil
}

// encode marshals a record and checks it fits the bucket.
func (b bucket) encode(key string, v any) ([]byte, error) {
	var data []byte
	var err error
	if rec, ok := v.(record.SessionRecord); ok {
		data, err = record.EncodeSession(rec) // one pass, with its kept members
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", record.ErrInvalid, key, err)
	}
	if b.maxValue > 0 && len(data) > b.maxValue {
		return nil, fmt.Errorf("%w: %s/%s is %d bytes, the bucket accepts %d", record.ErrTooLarge, b.name, key, len(data), b.maxValue)
	}
	return data, nil
}

// get is a direct get: any replica may answer, so it is a hint on a cluster.
func (b bucket) get(ctx context.Context, key string) (entry, error) {
	e, err := b.kv.Get(ctx, key)
	if err != nil {
		return entry{}, mapErr("get", key, err)
	}
	return entry{key: key, rev: e.Revision(), op: e.Operation(), data: e.Value()}, nil
}

// update is a revision CAS of an encoded value.
func (s *Store) update(ctx context.Context, b bucket, key string, data []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return 0, invalid("update %s: revision 0 (a conditional write needs the revision read)", key)
	}
	return s.settleCAS(ctx, b, key, rev, func() (uint64, error) {
		n, err := b.kv.Update(ctx, key, data, rev)
		return n, mapErr("update", key, err)
	})
}

// remove writes a delete marker only if key is at rev and returns the
// marker's revision. A stale rev deletes nothing. rev 0 is refused:
// jetstream would delete unconditionally. The delete is published as
// jetstream's kv.Delete publishes it, here to learn its revision.
func (s *Store) remove(ctx context.Context, b bucket, key string, rev uint64) (uint64, error) {
	if rev == 0 {
		return 0, invalid("delete %s: revision 0 (a conditional delete needs the revision read)", key)
	}
	return s.settleCAS(ctx, b, key, rev, func() (uint64, error) {
		msg := nats.NewMsg(subjects.KVSubject(b.name, key))
		msg.Header.Set(kvOpHeader, kvOpDelete)
		ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev))
		if err != nil {
			return 0, mapPublishErr("delete", key, err)
		}
		return ack.Sequence, nil
	})
}

// casAttempts bounds settleCAS: how many times one CAS is sent while the
// leader still shows the key at the revision it expects.
const casAttempts = 4

// settleCAS runs a revision CAS and, when it loses, asks the stream leader
// whether the key really moved. On a replicated stream the server refuses a
// CAS on a key whose previous write it acknowledged but has not finished
// applying (10164, "wrong last sequence", mapped to record.ErrConflict) even
// though nothing else wrote: if the leader still shows the key at rev, the
// same CAS is sent again (at most casAttempts times, a short backoff between).
// A key that moved is a real conflict and is returned as one. Sending the same
// CAS again is safe: a refused CAS wrote nothing, and if an earlier one did
// land the key is no longer at rev, so the retry conflicts.
func (s *Store) settleCAS(ctx context.Context, b bucket, key string, rev uint64, cas func() (uint64, error)) (uint64, error) {
	wait := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		n, err := cas()
		if !errors.Is(err, record.ErrConflict) || attempt == casAttempts {
			return n, err
		}
		cur, lerr := s.leaderLast(ctx, b, key)
		if lerr != nil || cur.rev != rev {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// writeFunc writes one value at an expected last revision (0 = the key's
// subject must be empty) and returns the new revision; a lost CAS matches
// record.ErrConflict.
type writeFunc func(ctx context.Context, expect uint64) (uint64, error)

// kvWrite writes through kv.Update, which maps both CAS codes.
func (b bucket) kvWrite(key string, data []byte) writeFunc {
	return func(ctx context.Context, expect uint64) (uint64, error) {
		rev, err := b.kv.Update(ctx, key, data, expect)
		return rev, mapErr("create", key, err)
	}
}

// ttlWrite publishes to the key's subject with a per-message TTL (a plain
// kv.Update would write the key without one).
func (s *Store) ttlWrite(b bucket, key string, data []byte, ttl time.Duration) writeFunc {
	return func(ctx context.Context, expect uint64) (uint64, error) {
		ack, err := s.js.Publish(ctx, subjects.KVSubject(b.name, key), data,
			jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithMsgTTL(ttl))
		if err != nil {
			return 0, mapPublishErr("write", key, err)
		}
		return ack.Sequence, nil
	}
}

// claimAttempts bounds claim's loop. Each extra attempt follows a key that
// changed between a lost CAS and the leader read (a marker written or
// expired meanwhile); a live holder ends the loop at once.
const claimAttempts = 4

// claim is a create-only write that, like kv.Create, succeeds over a delete,
// purge or TTL-expiry marker. Unlike kv.Create it reads the marker from the
// stream leader, not by a direct get that a lagging replica may answer, and
// every write goes through write, so a lost race on a replicated stream
// (code 10164) maps to record.ErrConflict like 10071. A live holder is reported as
// an *record.OwnedError described by holder (which may return nil).
func (s *Store) claim(ctx context.Context, b bucket, key string, write writeFunc, holder func(entry) *record.OwnedError) (uint64, error) {
	return s.claimFrom(ctx, b, key, 0, write, holder)
}

// claimFrom is claim whose first write expects the key's last message at
// revision expect (0: none), a hint that a conflict corrects.
func (s *Store) claimFrom(ctx context.Context, b bucket, key string, expect uint64, write writeFunc, holder func(entry) *record.OwnedError) (uint64, error) {
	for range claimAttempts {
		rev, err := write(ctx, expect)
		if !errors.Is(err, record.ErrConflict) {
			return rev, err
		}
		cur, err := s.leaderLast(ctx, b, key)
		switch {
		case errors.Is(err, record.ErrNotFound):
			expect = 0
		case err != nil:
			return 0, err
		case cur.live():
			return 0, owned(key, cur, holder)
		default:
			expect = cur.rev
		}
	}
	return 0, &record.OwnedError{Key: key}
}

func owned(key string, cur entry, holder func(entry) *record.OwnedError) *record.OwnedError {
	e := holder(cur)
	if e == nil {
		e = &record.OwnedError{}
	}
	e.Key, e.Revision = key, cur.rev
	return e
}

// decode unmarshals a live entry.
func decode(e entry, v any) error {
	if !e.live() {
		return fmt.Errorf("%w: %s (deleted at revision %d)", record.ErrNotFound, e.key, e.rev)
	}
	var err error
	if rec, ok := v.(*record.SessionRecord); ok {
		*rec, err = record.DecodeSession(e.data) // one pass, keeping unknown members
	} else {
		err = json.Unmarshal(e.data, v)
	}
	if err != nil {
		return fmt.Errorf("kv: decode %s at revision %d: %w", e.key, e.rev, err)
	}
	return nil
}
