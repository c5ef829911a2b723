package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
)

// The step journal (runtime.StepInput.Do): durable effects.
//
// Each step gets a journal, the runtime.Journal of its context. Call n of
// the step is recorded under subjects.JournalKey(session, turn, step, n)
// in the JournalStore, create-only, before Do returns its result. The
// entry carries the digest of the step's input; a step re-run at boot
// (the run that started it died or lost the session) reads the recorded
// entries from the leader and replays them in order: the same name at a
// position returns the recorded result without calling fn, another name
// fails the step (nondeterministic_step), and a digest that differs (the
// step's inputs changed: a delivery steered in before the re-run)
// discards the journal. A write that finds its key taken lost a race with
// another run of the same step (a frozen owner resumed): the winner's
// result is returned, and the loser, fenced, commits nothing. Once the
// commit that folds the step landed, its entries are removed (they also
// expire by their TTL).

// JournalStore holds steps' journals: kv.Journal implements it.
type JournalStore interface {
	// Get reads an entry from the leader (record.ErrNotFound: none).
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Create writes key if it holds no entry (record.ErrExists: taken).
	Create(ctx context.Context, key string, data []byte) (uint64, error)
	// Update replaces the entry at rev (record.ErrConflict: stale rev).
	Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error)
	// Delete removes key; a missing one is not an error.
	Delete(ctx context.Context, key string) error
}

// journalRetry bounds the retries of one journal read or write.
const journalRetry = 10 * time.Second

// journal is one run of one step's journal. Do runs in the step's
// goroutine (the agent's); the session reads positions after the step.
type journal struct {
	store   JournalStore
	blobs   *blobStore
	log     *slog.Logger
	fp      *failpoint.Registry
	session string
	in      runtime.StepInput
	rerun   bool // the step was in flight at boot: read what was recorded

	// mu guards the load and the replay; it is never held while a call's
	// fn runs (an abandoned step may run on, and its session must still
	// read outcome and positions).
	mu     sync.Mutex
	digest string // set by load, under mu
	loaded bool
	replay []wire.JournalEntry
	n      atomic.Int64 // calls so far
	keys   atomic.Int64 // highest position that may hold an entry

	fmu      sync.Mutex
	failure  error // nondeterministic_step or journal_unavailable: the step fails
	failCode string
	results  []string // digests of the out-of-line results recorded or read (under fmu)
	calls    []string // the calls' names by position (under fmu; StepDone.Calls)
}

// noteCall remembers the name of the call at position n (from 1).
func (j *journal) noteCall(n int, name string) {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	for len(j.calls) < n {
		j.calls = append(j.calls, "")
	}
	j.calls[n-1] = name
}

// noteResult remembers an out-of-line result's blob: collected with the
// journal once its step is folded.
func (j *journal) noteResult(ref wire.BlobRef) {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	j.results = append(j.results, ref.Digest)
}

// resultBlobs are the digests of the out-of-line results the journal
// recorded or read.
func (j *journal) resultBlobs() []string {
	if j == nil {
		return nil
	}
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return slices.Clone(j.results)
}

func newJournal(env *Env, log *slog.Logger, session string, in runtime.StepInput, rerun bool) *journal {
	if env.Journal == nil {
		return nil
	}
	return &journal{store: env.Journal, blobs: env.blobs, log: log, fp: env.Failpoints,
		session: session, in: in, rerun: rerun}
}

// Do implements runtime.Journal.
func (j *journal) Do(ctx context.Context, name string, fn runtime.EffectFunc) ([]byte, error) {
	if err := j.failed(); err != nil {
		return nil, err
	}
	n, rec, err := j.next(ctx)
	if err != nil {
		return nil, j.fail(runtime.CodeJournalUnavailable, err)
	}
	j.noteCall(n, name)
	if rec != nil {
		return j.recorded(ctx, n, name, *rec)
	}
	res, ferr := fn(ctx, runtime.EffectKey(j.session, j.in.TurnID, j.in.Step, n, name))
	if ferr != nil && ctx.Err() != nil {
		return nil, ferr // cancelled, not failed: nothing to record
	}
	return j.record(ctx, n, name, res, ferr)
}

// next loads the journal (once) and takes the next position: its recorded
// entry, if the replay has one.
func (j *journal) next(ctx context.Context) (int, *wire.JournalEntry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.load(ctx); err != nil {
		return 0, nil, err
	}
	n := int(j.n.Add(1))
	if n <= len(j.replay) {
		e := j.replay[n-1]
		return n, &e, nil
	}
	return n, nil, nil
}

// failed is the failure that failed the step, if any.
func (j *journal) failed() error {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return j.failure
}

// recorded returns the entry recorded at position n for a call of name.
func (j *journal) recorded(ctx context.Context, n int, name string, e wire.JournalEntry) ([]byte, error) {
	if e.Name != name {
		return nil, j.fail(runtime.CodeNondeterministic, &runtime.NondeterministicError{Position: n, Recorded: e.Name, Requested: name})
	}
	if e.Error != "" {
		return nil, &runtime.EffectError{Name: name, Message: e.Error}
	}
	if e.ResultRef != nil {
		j.noteResult(*e.ResultRef)
		data, err := j.blobs.get(ctx, j.session, *e.ResultRef)
		if err != nil {
			return nil, j.fail(runtime.CodeJournalUnavailable, err)
		}
		return data, nil
	}
	return e.Result, nil
}

// record writes call n's outcome create-only, then returns it; a position
// another run took first returns that run's outcome.
func (j *journal) record(ctx context.Context, n int, name string, res []byte, ferr error) ([]byte, error) {
	e, err := j.entry(ctx, name, res, ferr)
	if err != nil {
		return nil, j.fail(runtime.CodeJournalUnavailable, err)
	}
	data, _ := json.Marshal(e)
	key := subjects.JournalKey(j.session, j.in.TurnID, j.in.Step, n)
	j.raiseKeys(n)
	err = retryJournal(ctx, func() error {
		_, err := j.store.Create(ctx, key, data)
		return err
	})
	if errors.Is(err, record.ErrExists) {
		return j.lostRace(ctx, n, name, key, data)
	}
	if err != nil {
		return nil, j.fail(runtime.CodeJournalUnavailable, fmt.Errorf("record call %d (%s): %w", n, name, err))
	}
	j.fp.Run(failpoint.AfterJournal, failpoint.Args{SessionID: j.session})
	return res, ferr
}

// lostRace handles a position another run of the step recorded first: the
// same inputs get that run's outcome; an entry of other inputs (a stale
// journal) is replaced by ours.
func (j *journal) lostRace(ctx context.Context, n int, name, key string, ours []byte) ([]byte, error) {
	data, rev, err := j.store.Get(ctx, key)
	if err != nil {
		return nil, j.fail(runtime.CodeJournalUnavailable, err)
	}
	theirs, err := wire.DecodeJournalEntry(data)
	if err == nil && theirs.Digest == j.digest {
		j.log.Info("journal: another run of this step recorded this call first; its result stands", "key", key)
		return j.recorded(ctx, n, name, theirs)
	}
	if _, err := j.store.Update(ctx, key, ours, rev); err != nil {
		return nil, j.fail(runtime.CodeJournalUnavailable, fmt.Errorf("replace stale call %d: %w", n, err))
	}
	var e wire.JournalEntry
	_ = json.Unmarshal(ours, &e)
	return j.recorded(ctx, n, name, e)
}

// entry builds the entry of an outcome, a large result out of line.
func (j *journal) entry(ctx context.Context, name string, res []byte, ferr error) (wire.JournalEntry, error) {
	e := wire.JournalEntry{V: 1, Name: name, Digest: j.digest}
	switch {
	case ferr != nil:
		e.Error = ferr.Error()
		if e.Error == "" {
			e.Error = "error"
		}
	case len(res) > wire.MaxJournalInline:
		ref, err := j.blobs.put(ctx, j.session, res, false)
		if err != nil {
			return e, err
		}
		j.noteResult(ref)
		e.ResultRef = &ref
	default:
		e.Result = res
		if e.Result == nil {
			e.Result = []byte{}
		}
	}
	return e, nil
}

// load computes the input digest and, for a re-run, reads the recorded
// entries (positions 1, 2, … until one is missing) from the leader. A
// journal of other inputs is discarded.
func (j *journal) load(ctx context.Context) error {
	if j.loaded {
		return nil
	}
	j.digest = inputDigest(j.in)
	if j.rerun {
		entries, err := j.read(ctx)
		if err != nil {
			return err
		}
		j.raiseKeys(len(entries))
		// The replay is the leading run of entries of these inputs: an
		// entry of other inputs (and what follows it) is stale, replaced
		// when its position is written again.
		n := 0
		for n < len(entries) && entries[n].Digest == j.digest {
			n++
		}
		if n < len(entries) {
			j.log.Info("journal: the step's inputs changed since some of its calls were recorded; those run afresh",
				"turn", j.in.TurnID, "step", j.in.Step, "recorded", len(entries), "replayed", n)
		}
		j.replay = entries[:n]
	}
	j.loaded = true
	return nil
}

// read returns the entries recorded for the step, in position order.
func (j *journal) read(ctx context.Context) ([]wire.JournalEntry, error) {
	var out []wire.JournalEntry
	for n := 1; ; n++ {
		key := subjects.JournalKey(j.session, j.in.TurnID, j.in.Step, n)
		var data []byte
		err := retryJournal(ctx, func() error {
			var err error
			data, _, err = j.store.Get(ctx, key)
			return err
		})
		if errors.Is(err, record.ErrNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read call %d: %w", n, err)
		}
		e, err := wire.DecodeJournalEntry(data)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", n, err)
		}
		out = append(out, e)
	}
}

// raiseKeys notes that position n may hold an entry.
func (j *journal) raiseKeys(n int) {
	for {
		cur := j.keys.Load()
		if int64(n) <= cur || j.keys.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// fail marks the step failed with code (the driver fails its result) and
// returns err for Do to return.
func (j *journal) fail(code string, err error) error {
	j.fmu.Lock()
	defer j.fmu.Unlock()
	if j.failure == nil {
		j.failure, j.failCode = err, code
		j.log.Warn("journal: the step fails", "turn", j.in.TurnID, "step", j.in.Step, "code", code, "err", err)
	}
	return j.failure
}

// outcome overrides a step's result when its journal failed it.
func (j *journal) outcome(d runtime.StepDone) runtime.StepDone {
	if j == nil {
		return d
	}
	j.fmu.Lock()
	defer j.fmu.Unlock()
	if j.failure != nil {
		d.Result = runtime.Failed(j.failCode, j.failure)
	}
	for _, name := range j.calls {
		if name != "" {
			d.Calls = append(d.Calls, name)
		}
	}
	return d
}

// positions is how many keys the step's journal may hold (to remove).
func (j *journal) positions() int {
	if j == nil {
		return 0
	}
	return int(max(j.keys.Load(), j.n.Load()))
}

// inputDigest identifies a step's input: what a re-run must see for the
// recorded calls to stand (inputs, state, history position).
func inputDigest(in runtime.StepInput) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Session, Turn string
		Step, History int
		Caller        string
		State         json.RawMessage
		Inputs        []runtime.Command
	}{in.SessionID, in.TurnID, in.Step, len(in.History), in.Caller, in.State, in.Inputs})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// retryJournal retries op with backoff while it fails with anything but
// an answer (found, not found, taken), bounded by journalRetry and ctx.
func retryJournal(ctx context.Context, op func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 20*time.Millisecond, time.Second, journalRetry
	return backoff.Retry(func() error {
		err := op()
		if err == nil || errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrExists) ||
			errors.Is(err, record.ErrTooLarge) || errors.Is(err, record.ErrInvalid) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx))
}
