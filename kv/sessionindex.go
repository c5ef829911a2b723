package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Index is the session index (docs/nats-layout.md, "The session index"):
// one derived entry per session, written by revision CAS under the rule
// that an entry derived from a newer session-record revision always wins,
// and the postings and hour markers a listing walks. Nothing decides
// ownership or eligibility from it: a lost write is healed by the owners'
// reconciler or a rebuild. It holds no mutable state and is safe for
// concurrent use.
type Index struct {
	js     jetstream.JetStream
	b      bucket
	stream jetstream.Stream // the bucket's stream: subject listings
	events jetstream.Stream // the events stream: a session's first event
	names  subjects.Names
	prefix string // the bucket's subject prefix, $KV.<bucket>.
	now    func() time.Time
	// beforeCAS, when set (tests), runs between an attempt's postings
	// and its entry's CAS; afterCAS, after a CAS that landed: its error
	// stands for an answer lost on the way back.
	beforeCAS func()
	afterCAS  func() error
}

// OpenIndex opens the session index bucket named by names (topology.Ensure
// creates it) and the events stream it reads creation times from.
func OpenIndex(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Index, error) {
	if names == (subjects.Names{}) {
		return nil, invalid("zero subjects.Names (use subjects.Default or subjects.New)")
	}
	b, err := openBucket(ctx, js, names.IndexBucket())
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, "KV_"+b.name)
	if err != nil {
		return nil, fmt.Errorf("kv: index stream: %w", err)
	}
	ev, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return nil, fmt.Errorf("kv: events stream: %w", err)
	}
	return &Index{js: js, b: b, stream: st, events: ev, names: names, prefix: subjects.KVSubject(b.name, ""),
		now: func() time.Time { return time.Now().UTC() }}, nil
}

// IndexOutcome says what Put did.
type IndexOutcome int

const (
	// IndexWritten: the entry was created or replaced.
	IndexWritten IndexOutcome = iota
	// IndexUnchanged: the stored entry already said the same.
	IndexUnchanged
	// IndexOlder: the stored entry derives from a newer record revision;
	// nothing was written.
	IndexOlder
)

// indexAttempts bounds Put's read-CAS loop against concurrent writers.
const indexAttempts = 6

// Get reads a session's entry (record.ErrNotFound when it has none) and
// its revision. A direct get: a hint on a cluster.
func (x *Index) Get(ctx context.Context, sessionID string) (record.IndexEntry, uint64, error) {
	e, err := x.b.get(ctx, subjects.IndexEntryKey(sessionID))
	if err != nil {
		return record.IndexEntry{}, 0, err
	}
	var v record.IndexEntry
	if err := decode(e, &v); err != nil {
		return record.IndexEntry{}, 0, err
	}
	return v, e.rev, nil
}

// Put writes e unless the stored entry derives from a newer record
// revision. A zero CreatedAt keeps the stored one, else is read from the
// session's first event (session.started), else is now. New postings and
// their hour markers are written before the entry, stale ones removed
// after it, so a crash leaves at worst a stale posting (a listing checks
// every posting against its entry) — never an entry whose postings were
// removed. verify also checks that every posting of an unchanged entry
// exists (the reconciler's repair).
//
// A writer that loses the entry's CAS to another (the old owner's last
// write racing the new owner's first, in a handoff) has already written
// its postings: it deletes, by the sequence it wrote, each of them the
// entry it finally leaves (or finds) does not have, so a lost race leaves
// no stale posting for Count to count. And a CAS whose answer was lost
// (a leader election) may have landed: the postings of the entry it
// replaced are removed whatever the outcome, or the next attempt, finding
// its own entry unchanged, would leave them for ever.
func (x *Index) Put(ctx context.Context, e record.IndexEntry, verify bool) (IndexOutcome, error) {
	return x.put(ctx, e, verify, &putState{wrote: map[string]uint64{}})
}

// putState is what the attempts of one write (Put, or every try of
// Write) learned: the postings they wrote, by key and sequence, and those
// of the entries their CASes may have replaced.
type putState struct {
	wrote    map[string]uint64
	replaced []subjects.Posting
}

// settle removes what a write's attempts left that keep (the postings of
// the entry the write leaves or found) does not have: the postings it
// wrote (by sequence) and those of the entries it may have replaced.
func (x *Index) settle(ctx context.Context, st *putState, keep []subjects.Posting) error {
	if err := x.dropWritten(ctx, st.wrote, keep); err != nil {
		return err
	}
	return x.removeStale(ctx, missing(st.replaced, keep))
}

func (x *Index) put(ctx context.Context, e record.IndexEntry, verify bool, st *putState) (IndexOutcome, error) {
	if err := subjects.ValidateSessionID(e.SessionID); err != nil {
		return 0, invalid("index entry: %v", err)
	}
	key := subjects.IndexEntryKey(e.SessionID)
	news := e // what the writer says; each attempt builds its write from it
	for range indexAttempts {
		e := news
		cur, rev, err := x.Get(ctx, e.SessionID)
		found := err == nil
		if err != nil && !errors.Is(err, record.ErrNotFound) {
			return 0, err
		}
		if found && cur.Revision > e.Revision {
			return IndexOlder, x.settle(ctx, st, postingsOf(cur))
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = x.createdAt(ctx, e.SessionID, cur, found)
		}
		want := postingsOf(e)
		e.Storage = mergeStorage(cur, found, e)
		if found && cur.Same(e) && cur.CreatedAt.Equal(e.CreatedAt) && sameStorage(cur.Storage, e.Storage) {
			if err := x.settle(ctx, st, want); err != nil {
				return 0, err
			}
			if verify {
				return IndexUnchanged, x.ensure(ctx, want)
			}
			return IndexUnchanged, nil
		}
		var had []subjects.Posting
		if found {
			had = postingsOf(cur)
		}
		add := want
		if !verify {
			add = missing(want, had)
		}
		seqs, err := x.addPostings(ctx, add)
		maps.Copy(st.wrote, seqs)
		if err != nil {
			return 0, err
		}
		if x.beforeCAS != nil {
			x.beforeCAS()
		}
		if e.IndexedAt.IsZero() {
			e.IndexedAt = x.now()
		}
		data, err := x.b.encode(key, e)
		if err != nil {
			return 0, err
		}
		for _, p := range missing(had, want) {
			if !slices.Contains(st.replaced, p) {
				st.replaced = append(st.replaced, p)
			}
		}
		if found {
			_, err = x.b.kv.Update(ctx, key, data, rev)
		} else {
			_, err = x.b.kv.Create(ctx, key, data)
		}
		if err = mapErr("index", key, err); errors.Is(err, record.ErrConflict) {
			continue
		}
		if err == nil && x.afterCAS != nil {
			err = x.afterCAS()
		}
		if err != nil {
			return 0, err
		}
		return IndexWritten, x.settle(ctx, st, want)
	}
	return 0, fmt.Errorf("%w: index entry %s: %d writers raced", record.ErrConflict, e.SessionID, indexAttempts)
}

// mergeStorage is the storage e is written with: a recount (e.Storage)
// as it is, else the stored one plus e.Grew.
func mergeStorage(cur record.IndexEntry, found bool, e record.IndexEntry) *record.Storage {
	if e.Storage != nil {
		return e.Storage
	}
	var st record.Storage
	if found && cur.Storage != nil {
		st = *cur.Storage
	} else if e.Grew == nil {
		return nil
	}
	if e.Grew != nil {
		st = st.Plus(*e.Grew)
	}
	return &st
}

func sameStorage(a, b *record.Storage) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// Delete removes a session's entry and its postings.
func (x *Index) Delete(ctx context.Context, sessionID string) error {
	cur, rev, err := x.Get(ctx, sessionID)
	if errors.Is(err, record.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := x.deleteSeq(ctx, rev); err != nil {
		return err
	}
	return x.removePostings(ctx, postingsOf(cur))
}

// RemovePosting removes one posting (a stale one a reconciler found) if
// it was written more than olderThan ago.
func (x *Index) RemovePosting(ctx context.Context, p subjects.Posting, olderThan time.Duration) error {
	e, err := x.b.kv.Get(ctx, p.Key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return mapErr("index get", p.Key(), err)
	}
	if x.now().Sub(e.Created()) < olderThan {
		return nil
	}
	return x.deleteSeq(ctx, e.Revision())
}

// createdAt is the creation time to keep: the stored entry's, else the
// time of the session's first event, else now (no event yet, or the
// stream did not answer: the next write keeps it).
func (x *Index) createdAt(ctx context.Context, sessionID string, cur record.IndexEntry, found bool) time.Time {
	if found && !cur.CreatedAt.IsZero() {
		return cur.CreatedAt
	}
	if t, err := x.FirstEventTime(ctx, sessionID); err == nil && !t.IsZero() {
		return t
	}
	return x.now()
}

// FirstEventTime is the time of a session's first event on its stream
// (its session.started); zero when the stream holds none.
func (x *Index) FirstEventTime(ctx context.Context, sessionID string) (time.Time, error) {
	m, err := x.events.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(x.names.Events(sessionID)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("kv: first event of %s: %w", sessionID, err)
	}
	var ev struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return time.Time{}, fmt.Errorf("kv: first event of %s: %w", sessionID, err)
	}
	return ev.Time, nil
}

// postingsOf is every posting of an entry: all, its agent, deployment,
// state, deployment and state, each tag, each durable wait kind and "any"
// (and its deployment, when it waits), its parent.
func postingsOf(e record.IndexEntry) []subjects.Posting {
	hour, order := subjects.IndexHour(e.CreatedAt), subjects.IndexOrder(e.CreatedAt)
	var out []subjects.Posting
	add := func(dim, value string) {
		if subjects.CheckIndexValue(value) == nil {
			out = append(out, subjects.Posting{Dim: dim, Value: value, Hour: hour, Order: order, SessionID: e.SessionID})
		}
	}
	add(subjects.DimAll, subjects.AllValue)
	add(subjects.DimAgent, e.Agent)
	add(subjects.DimDep, e.DeploymentID)
	add(subjects.DimState, string(e.State))
	add(subjects.DimDepState, subjects.DepState(e.DeploymentID, string(e.State)))
	for _, k := range slices.Sorted(maps.Keys(e.Tags)) {
		add(subjects.DimTag, subjects.TagValue(k, e.Tags[k]))
	}
	for _, kind := range record.DurableWaitKinds {
		if e.Waiting(kind) {
			add(subjects.DimWait, kind)
		}
	}
	if len(e.WaitingFor) > 0 {
		add(subjects.DimWait, "any")
		add(subjects.DimDepWait, e.DeploymentID)
	}
	add(subjects.DimParent, e.ParentSessionID)
	return out
}

// Postings is every posting the entry should have.
func Postings(e record.IndexEntry) []subjects.Posting { return postingsOf(e) }

// missing is the postings of a not in b.
func missing(a, b []subjects.Posting) []subjects.Posting {
	var out []subjects.Posting
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// addPostings writes each posting's hour marker and the posting,
// pipelined, and returns the sequence of each posting it wrote (by key;
// markers are shared by every session of their hour and not returned).
func (x *Index) addPostings(ctx context.Context, ps []subjects.Posting) (map[string]uint64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	acks := make([]jetstream.PubAckFuture, 0, 2*len(ps))
	for _, p := range ps {
		for _, key := range []string{p.Marker(), p.Key()} {
			f, err := x.js.PublishAsync(x.prefix+key, nil)
			if err != nil {
				return nil, fmt.Errorf("kv: index posting %s: %w", key, err)
			}
			acks = append(acks, f)
		}
	}
	seqs := make(map[string]uint64, len(ps))
	for i, f := range acks {
		select {
		case ack := <-f.Ok():
			if i%2 == 1 {
				seqs[strings.TrimPrefix(f.Msg().Subject, x.prefix)] = ack.Sequence
			}
		case err := <-f.Err():
			return seqs, fmt.Errorf("kv: index posting %s: %w", strings.TrimPrefix(f.Msg().Subject, x.prefix), err)
		case <-ctx.Done():
			return seqs, ctx.Err()
		}
	}
	return seqs, nil
}

// dropWritten deletes each posting Put wrote (wrote: key → sequence) that
// keep does not have, by the sequence written: a posting written again
// since (a newer message of its key) is left alone.
func (x *Index) dropWritten(ctx context.Context, wrote map[string]uint64, keep []subjects.Posting) error {
	for key, seq := range wrote {
		if slices.ContainsFunc(keep, func(p subjects.Posting) bool { return p.Key() == key }) {
			continue
		}
		if err := x.deleteSeq(ctx, seq); err != nil {
			return err
		}
	}
	return nil
}

// ensure writes whichever postings (or their markers) are missing.
func (x *Index) ensure(ctx context.Context, ps []subjects.Posting) error {
	var lacking []subjects.Posting
	for _, p := range ps {
		for _, key := range []string{p.Key(), p.Marker()} {
			_, err := x.b.kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				lacking = append(lacking, p)
				break
			}
			if err != nil {
				return mapErr("index get", key, err)
			}
		}
	}
	_, err := x.addPostings(ctx, lacking)
	return err
}

// removePostings deletes postings by the revision read. A posting already
// gone (or written again since it was read) is left alone.
func (x *Index) removePostings(ctx context.Context, ps []subjects.Posting) error {
	for _, p := range ps {
		e, err := x.b.kv.Get(ctx, p.Key())
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return mapErr("index get", p.Key(), err)
		}
		if err := x.deleteSeq(ctx, e.Revision()); err != nil {
			return err
		}
	}
	return nil
}

// deleteSeq deletes one message of the index's stream (its subject
// leaves the subject state: no marker stays behind); one already gone is
// not an error. Deleting a key's message by the revision read removes
// nothing newer.
func (x *Index) deleteSeq(ctx context.Context, seq uint64) error {
	err := x.stream.DeleteMsg(ctx, seq)
	var api *jetstream.APIError
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) ||
		errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeMessageNotFound {
		return nil
	}
	return fmt.Errorf("kv: index delete %d: %w", seq, err)
}

// keys lists the bucket's keys matching filter (a key pattern with
// wildcards) from the stream's subject state: no message is read.
func (x *Index) keys(ctx context.Context, filter string) ([]string, error) {
	info, err := x.stream.Info(ctx, jetstream.WithSubjectFilter(x.prefix+filter))
	if err != nil {
		return nil, fmt.Errorf("kv: index list %s: %w", filter, err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for s := range info.State.Subjects {
		out = append(out, strings.TrimPrefix(s, x.prefix))
	}
	return out, nil
}

// Write is Put without the repair and outcome: an owner's write of its
// session's entry (session.Index), tried again with backoff until it
// lands or ctx ends (the caller bounds it) — a stream without a leader
// for a while, a dropped connection. A write lost for good only costs the
// listing its accuracy until the reconciler's pass, but until then the
// counts by value (Count) still count the session where it was. An invalid
// entry is not tried again.
func (x *Index) Write(ctx context.Context, e record.IndexEntry) error {
	st := &putState{wrote: map[string]uint64{}} // shared by the tries: one write
	return retryIndex(ctx, func(ctx context.Context) error {
		_, err := x.put(ctx, e, false, st)
		if errors.Is(err, record.ErrInvalid) {
			return backoff.Permanent(err)
		}
		return err
	})
}

// indexAttempt bounds one attempt of a retried index write: a request sent
// while the connection was down, or to a leader that went away, may never
// be answered.
const indexAttempt = 5 * time.Second

// retryIndex runs op, each attempt bounded by indexAttempt, from 50 ms to
// 5 s apart, until it succeeds, fails permanently or ctx ends.
func retryIndex(ctx context.Context, op func(context.Context) error) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0)), ctx)
	return backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, indexAttempt)
		defer cancel()
		return op(actx)
	}, b)
}

// removeStale removes the postings a written entry no longer has, tried
// again until it succeeds or ctx ends: the entry is already right, and a
// stale posting left behind is counted by Count (which does not read
// entries) until the reconciler removes it. A later Put of the same entry
// finds nothing to change and so would not remove it either.
func (x *Index) removeStale(ctx context.Context, ps []subjects.Posting) error {
	if len(ps) == 0 {
		return nil
	}
	return retryIndex(ctx, func(ctx context.Context) error { return x.removePostings(ctx, ps) })
}

// Count is how many sessions have a posting of dim's value (a stale
// posting a writer has not removed yet counts too): the subjects an
// ephemeral consumer filtered on them has pending, counted by the server
// without sending one.
func (x *Index) Count(ctx context.Context, dim, value string) (int, error) {
	c, err := x.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: x.prefix + "p." + dim + "." + value + ".>", DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: 10 * time.Second, Replicas: 1,
	})
	if err != nil {
		return 0, fmt.Errorf("kv: index count %s %s: %w", dim, value, err)
	}
	n := int(c.CachedInfo().NumPending)
	_ = x.stream.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name)
	return n, nil
}

// Values lists the values of dim that have postings, from their hour
// markers (a marker may outlive the last posting of its hour).
func (x *Index) Values(ctx context.Context, dim string) ([]string, error) {
	keys, err := x.keys(ctx, "m."+dim+".*.*")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if _, v, _, err := subjects.ParseMarker(k); err == nil {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// CountEvents counts a session's events and their bytes on its stream: a
// headers-only walk of its subject (each message's Nats-Msg-Size), no
// payload read.
func (x *Index) CountEvents(ctx context.Context, sessionID string) (n uint64, size int64, err error) {
	subject := x.names.Events(sessionID)
	c, err := x.js.OrderedConsumer(ctx, x.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, HeadersOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("kv: count events of %s: %w", sessionID, err)
	}
	for {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			return 0, 0, fmt.Errorf("kv: count events of %s: %w", sessionID, err)
		}
		got, last := 0, false
		for m := range batch.Messages() {
			got++
			if v, err := strconv.ParseInt(m.Headers().Get(nats.MsgSize), 10, 64); err == nil {
				size += v
			}
			n++
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				last = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return 0, 0, fmt.Errorf("kv: count events of %s: %w", sessionID, err)
		}
		if got == 0 || last {
			return n, size, nil
		}
	}
}
