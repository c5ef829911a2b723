package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Rev is one revision of a session record as a RecordWatch saw it.
type Rev struct {
	Rev     uint64
	At      time.Time // when the watcher received it
	Deleted bool      // a delete or purge (Rec is empty)
	Rec     record.SessionRecord
}

// RecordWatch keeps every revision of every session record, from a watcher
// on baton_sessions: started before the first session, it sees each
// session's whole history.
type RecordWatch struct {
	stop    func() error
	mu      sync.Mutex
	by      map[string][]Rev
	runProc map[string]string // owner run → its process
	bad     []string
	total   int
}

// WatchRecords starts the watcher; Stop ends it.
func WatchRecords(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*RecordWatch, error) {
	b, err := js.KeyValue(ctx, names.SessionsBucket())
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", names.SessionsBucket(), err)
	}
	kw, err := b.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", names.SessionsBucket(), err)
	}
	rw := &RecordWatch{stop: kw.Stop, by: map[string][]Rev{}, runProc: map[string]string{}}
	go func() {
		for e := range kw.Updates() {
			if e != nil {
				rw.add(e)
			}
		}
	}()
	return rw, nil
}

func (rw *RecordWatch) add(e jetstream.KeyValueEntry) {
	r := Rev{Rev: e.Revision(), At: time.Now(), Deleted: e.Operation() != jetstream.KeyValuePut}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if !r.Deleted {
		if err := json.Unmarshal(e.Value(), &r.Rec); err != nil {
			rw.bad = append(rw.bad, fmt.Sprintf("%s rev %d: %v", e.Key(), e.Revision(), err))
			return
		}
		rw.total++
		if r.Rec.OwnerRunID != "" {
			rw.runProc[r.Rec.OwnerRunID] = r.Rec.OwnerProcess
		}
	}
	rw.by[e.Key()] = append(rw.by[e.Key()], r)
}

// Stop ends the watcher.
func (rw *RecordWatch) Stop() { _ = rw.stop() }

// History is every revision of sid seen, in order.
func (rw *RecordWatch) History(sid string) []Rev {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.by[sid])
}

// Latest is the last revision of sid seen; ok is false if there is none or
// it is a delete.
func (rw *RecordWatch) Latest(sid string) (record.SessionRecord, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	revs := rw.by[sid]
	if len(revs) == 0 || revs[len(revs)-1].Deleted {
		return record.SessionRecord{}, false
	}
	return revs[len(revs)-1].Rec, true
}

// On reports whether sid's latest record is an active session of dep.
func (rw *RecordWatch) On(sid, dep string) bool {
	r, ok := rw.Latest(sid)
	return ok && r.DeploymentID == dep && r.State == record.StateActive
}

// FirstOtherOwner is when a revision of sid seen after t first named an
// owner process other than p.
func (rw *RecordWatch) FirstOtherOwner(sid, p string, t time.Time) (time.Time, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for _, r := range rw.by[sid] {
		if r.At.After(t) && !r.Deleted && r.Rec.OwnerProcess != "" && r.Rec.OwnerProcess != p {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// Process is the owner process of run (empty if no record named it).
func (rw *RecordWatch) Process(run string) string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.runProc[run]
}

// RunsOf is every owner run of process p that a record named.
func (rw *RecordWatch) RunsOf(p string) map[string]bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out := map[string]bool{}
	for run, proc := range rw.runProc {
		if proc == p {
			out[run] = true
		}
	}
	return out
}

// Total is the number of record revisions (puts) decoded.
func (rw *RecordWatch) Total() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.total
}

// Bad lists the revisions whose value did not decode.
func (rw *RecordWatch) Bad() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.bad)
}

// Explain renders sid's record history, for failure messages.
func (rw *RecordWatch) Explain(sid string) string {
	var b strings.Builder
	for _, h := range rw.History(sid) {
		r := h.Rec
		ho := ""
		if r.Handoff != nil {
			ho = fmt.Sprintf(" handoff %s→%s %s/%s", r.Handoff.ID, r.Handoff.Target, r.Handoff.Outcome, r.Handoff.Step)
		}
		fmt.Fprintf(&b, "\n  rev %d %s: %s/%s epoch %d run %s state %s writer %s#%d%s",
			h.Rev, h.At.Format("15:04:05.000"), r.DeploymentID, r.OwnerProcess, r.Epoch, r.OwnerRunID, r.State, r.Writer, r.WriteCounter, ho)
	}
	return b.String()
}
