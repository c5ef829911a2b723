package kv_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func openIndex(t *testing.T) *kv.Index {
	t.Helper()
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	_, js := natstest.Connect(t, s.ClientURL())
	x, err := kv.OpenIndex(ctx(t), js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	return x
}

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func entry(id string, rev uint64, created time.Time) record.IndexEntry {
	return record.IndexEntry{SessionID: id, Agent: "support", DeploymentID: "dep-a", State: record.StateActive,
		CreatedAt: created, Epoch: 1, Revision: rev}
}

func put(t *testing.T, x *kv.Index, e record.IndexEntry, want kv.IndexOutcome) {
	t.Helper()
	got, err := x.Put(ctx(t), e, false)
	if err != nil || got != want {
		t.Fatalf("put %s at revision %d: %v, %v; want outcome %v", e.SessionID, e.Revision, got, err, want)
	}
}

// TestIndexNewerRevisionWins: an entry derived from an older record
// revision (a late write of an old owner) never replaces a newer one, and
// a rewrite moves the entry's postings with it.
func TestIndexNewerRevisionWins(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	e := entry("s1", 10, t0)
	e.Epoch = 2
	put(t, x, e, kv.IndexWritten)
	put(t, x, e, kv.IndexUnchanged)
	old := entry("s1", 9, t0)
	old.State, old.Epoch = record.StateHibernated, 1
	put(t, x, old, kv.IndexOlder)
	got, _, err := x.Get(c, "s1")
	if err != nil || got.State != record.StateActive || got.Epoch != 2 || got.Revision != 10 {
		t.Fatalf("after a late old write: %+v %v", got, err)
	}
	newer := entry("s1", 12, time.Time{}) // zero CreatedAt keeps the stored one
	newer.State, newer.Epoch = record.StateHibernated, 3
	put(t, x, newer, kv.IndexWritten)
	got, _, _ = x.Get(c, "s1")
	if !got.CreatedAt.Equal(t0) || got.State != record.StateHibernated {
		t.Fatalf("newer write: %+v", got)
	}
	ids := listAll(t, x, kv.IndexQuery{State: "active"}, 10)
	if len(ids) != 0 {
		t.Fatalf("state=active after the move to hibernated: %v", ids)
	}
	if ids := listAll(t, x, kv.IndexQuery{State: "hibernated"}, 10); !slices.Equal(ids, []string{"s1"}) {
		t.Fatalf("state=hibernated: %v", ids)
	}
}

// TestIndexListFilters lists by every served filter and combinations,
// newest first, across hours, in pages.
func TestIndexListFilters(t *testing.T) {
	x := openIndex(t)
	var all []string
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		e := entry(id, uint64(100+i), t0.Add(time.Duration(i)*17*time.Minute))
		if i%3 == 0 {
			e.DeploymentID = "dep-b"
		}
		if i%5 == 0 {
			e.State = record.StateQuarantined
		}
		if i%4 == 0 {
			e.Tags = map[string]string{"tenant": "acme", "user": fmt.Sprintf("U%d", i%8)}
		}
		if i%6 == 0 {
			e.WaitingFor = []record.Wait{{Kind: record.WaitInput, RequestID: "r"}}
		}
		if i >= 20 {
			e.ParentSessionID = "s00"
		}
		put(t, x, e, kv.IndexWritten)
		all = append([]string{id}, all...) // newest first
	}
	filter := func(keep func(i int) bool) []string {
		var out []string
		for _, id := range all {
			var i int
			fmt.Sscanf(id, "s%d", &i)
			if keep(i) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    kv.IndexQuery
		keep func(int) bool
	}{
		{"all", kv.IndexQuery{}, func(int) bool { return true }},
		{"agent", kv.IndexQuery{Agent: "support"}, func(int) bool { return true }},
		{"other agent", kv.IndexQuery{Agent: "sales"}, func(int) bool { return false }},
		{"deployment", kv.IndexQuery{Deployment: "dep-b"}, func(i int) bool { return i%3 == 0 }},
		{"state", kv.IndexQuery{State: "quarantined"}, func(i int) bool { return i%5 == 0 }},
		{"tag", kv.IndexQuery{Tags: map[string]string{"tenant": "acme"}}, func(i int) bool { return i%4 == 0 }},
		{"two tags", kv.IndexQuery{Tags: map[string]string{"tenant": "acme", "user": "U4"}}, func(i int) bool { return i%8 == 4 }},
		{"waiting", kv.IndexQuery{Waiting: "input"}, func(i int) bool { return i%6 == 0 }},
		{"waiting any", kv.IndexQuery{Waiting: "any"}, func(i int) bool { return i%6 == 0 }},
		{"waiting task", kv.IndexQuery{Waiting: "task"}, func(int) bool { return false }},
		{"parent", kv.IndexQuery{Parent: "s00"}, func(i int) bool { return i >= 20 }},
		{"state and deployment", kv.IndexQuery{State: "active", Deployment: "dep-b"}, func(i int) bool { return i%3 == 0 && i%5 != 0 }},
		{"tag and waiting", kv.IndexQuery{Waiting: "input", Tags: map[string]string{"tenant": "acme"}}, func(i int) bool { return i%12 == 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := filter(c.keep)
			for _, limit := range []int{1, 4, 50} {
				if got := listAll(t, x, c.q, limit); !slices.Equal(got, want) {
					t.Fatalf("limit %d: %v, want %v", limit, got, want)
				}
				// Both ways of reading the postings: an hour at a time,
				// and all at once (a sparse value's).
				for _, whole := range []bool{false, true} {
					if got := listFrom(t, x, c.q, limit, kv.StartCursor(c.q, whole)); !slices.Equal(got, want) {
						t.Fatalf("limit %d, whole %v: %v, want %v", limit, whole, got, want)
					}
				}
			}
		})
	}
	// A cursor is tied to its query.
	p, err := x.List(ctx(t), kv.IndexQuery{}, "", 2)
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	if _, err := x.List(ctx(t), kv.IndexQuery{State: "active"}, p.Next, 2); !errors.Is(err, kv.ErrBadCursor) {
		t.Fatalf("cursor of another query: %v", err)
	}
	if _, err := x.List(ctx(t), kv.IndexQuery{}, "%%%", 2); !errors.Is(err, kv.ErrBadCursor) {
		t.Fatalf("malformed cursor: %v", err)
	}
}

// TestIndexStalePostingIgnored: a posting the entry no longer has (a
// crash between the entry's write and the posting's removal) is never
// listed, and a session is listed once.
func TestIndexStalePostingIgnored(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	e := entry("s1", 5, t0)
	put(t, x, e, kv.IndexWritten)
	moved := e
	moved.State, moved.Revision = record.StatePaused, 6
	// Write the entry alone: its old state posting stays behind.
	put(t, x, moved, kv.IndexWritten)
	stale := kv.Postings(e)
	// And one of another creation time for its current state (as a rebuild
	// that read another time would leave): the session is listed once.
	other := moved
	other.CreatedAt = t0.Add(-3 * time.Hour)
	stale = append(stale, kv.Postings(other)...)
	if err := x.AddPostings(c, stale); err != nil {
		t.Fatal(err)
	}
	if ids := listAll(t, x, kv.IndexQuery{State: "active"}, 10); len(ids) != 0 {
		t.Fatalf("a stale posting listed: %v", ids)
	}
	if ids := listAll(t, x, kv.IndexQuery{State: "paused"}, 10); !slices.Equal(ids, []string{"s1"}) {
		t.Fatalf("state=paused: %v", ids)
	}
}

// listAll walks every page of q.
func listAll(t *testing.T, x *kv.Index, q kv.IndexQuery, limit int) []string {
	t.Helper()
	return listFrom(t, x, q, limit, "")
}

// listFrom walks every page of q from cursor after.
func listFrom(t *testing.T, x *kv.Index, q kv.IndexQuery, limit int, after string) []string {
	t.Helper()
	var out []string
	for range 1000 {
		p, err := x.List(ctx(t), q, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > limit {
			t.Fatalf("page of %d entries, limit %d", len(p.Entries), limit)
		}
		for _, e := range p.Entries {
			out = append(out, e.SessionID)
		}
		if p.Next == "" {
			return out
		}
		after = p.Next
	}
	t.Fatal("the walk did not end")
	return nil
}

// TestIndexCount counts a value's sessions without reading them, and a
// removed posting leaves no trace in the count.
func TestIndexCount(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	for i := range 12 {
		e := entry(fmt.Sprintf("c%02d", i), uint64(10+i), t0.Add(time.Duration(i)*40*time.Minute))
		if i%3 == 0 {
			e.State = record.StatePaused
		}
		put(t, x, e, kv.IndexWritten)
	}
	count := func(dim, value string) int {
		n, err := x.Count(c, dim, value)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if a, p, ds := count(subjects.DimState, "active"), count(subjects.DimState, "paused"), count(subjects.DimDepState, "dep-a=paused"); a != 8 || p != 4 || ds != 4 {
		t.Fatalf("counts active %d paused %d dep-a=paused %d, want 8 4 4", a, p, ds)
	}
	e := entry("c01", 99, t0.Add(40*time.Minute))
	e.State = record.StatePaused
	put(t, x, e, kv.IndexWritten)
	if a, p := count(subjects.DimState, "active"), count(subjects.DimState, "paused"); a != 7 || p != 5 {
		t.Fatalf("after a move: active %d paused %d, want 7 5", a, p)
	}
	if err := x.Delete(c, "c02"); err != nil {
		t.Fatal(err)
	}
	if a, all := count(subjects.DimState, "active"), count(subjects.DimAll, subjects.AllValue); a != 6 || all != 11 {
		t.Fatalf("after a delete: active %d all %d, want 6 11", a, all)
	}
}

// TestIndexStorage: owners' news adds to the stored storage (the event
// count set, the bytes added) even on an otherwise unchanged entry's next
// write; a recount replaces it; CountEvents counts a session's events and
// bytes from the stream.
func TestIndexStorage(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	e := entry("st1", 5, t0)
	e.Grew = &record.Storage{Events: 3, EventBytes: 300}
	put(t, x, e, kv.IndexWritten)
	e.Revision, e.State, e.Grew = 6, record.StatePaused, &record.Storage{Events: 5, EventBytes: 200, BlobBytes: 50}
	put(t, x, e, kv.IndexWritten)
	got, _, err := x.Get(c, "st1")
	if err != nil || got.Storage == nil || *got.Storage != (record.Storage{Events: 5, EventBytes: 500, BlobBytes: 50}) {
		t.Fatalf("after two hints: %+v %v", got.Storage, err)
	}
	e.Revision, e.Grew, e.Storage = 7, nil, &record.Storage{Events: 9, EventBytes: 1234}
	put(t, x, e, kv.IndexWritten) // a recount, the rest unchanged
	if got, _, _ = x.Get(c, "st1"); *got.Storage != (record.Storage{Events: 9, EventBytes: 1234}) {
		t.Fatalf("after a recount: %+v", got.Storage)
	}
	e.Revision, e.Storage = 8, nil
	put(t, x, e, kv.IndexUnchanged) // no news: nothing to write
}

// TestIndexWriteOutlivesAnOutage: an owner's write made while the server is
// down lands once it is back, whole — the entry and its postings moved, no
// stale posting left for the counts — without the reconciler.
func TestIndexWriteOutlivesAnOutage(t *testing.T) {
	o := startOutage(t)
	c := ctx(t)
	x, err := kv.OpenIndex(c, o.js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	put(t, x, entry("w1", 1, t0), kv.IndexWritten)
	moved := entry("w1", 2, t0)
	moved.DeploymentID = "dep-b"

	o.down()
	done := make(chan error, 1)
	go func() { done <- x.Write(c, moved) }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the write returned while the server was down: %v", err)
	default:
	}
	o.up()
	if err := <-done; err != nil {
		t.Fatalf("write across the outage: %v", err)
	}
	got, _, err := x.Get(c, "w1")
	if err != nil || got.DeploymentID != "dep-b" || got.Revision != 2 {
		t.Fatalf("entry after the outage: %+v %v", got, err)
	}
	for dep, want := range map[string]int{"dep-a": 0, "dep-b": 1} {
		if n, err := x.Count(c, subjects.DimDep, dep); err != nil || n != want {
			t.Fatalf("count %s = %d (%v), want %d", dep, n, err, want)
		}
	}
}

// TestIndexLostRaceLeavesNoPosting: a writer that has written its
// postings and then loses the entry's CAS to a newer revision (the old
// owner's last write racing the new owner's first, in a handoff) removes
// the postings it wrote, so no count still finds the session where the
// losing writer said it was. A writer that loses one attempt and wins the
// next keeps only the postings of what it wrote.
func TestIndexLostRaceLeavesNoPosting(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	put(t, x, entry("s1", 10, t0), kv.IndexWritten) // dep-a, active
	count := func(dim, value string) int {
		t.Helper()
		n, err := x.Count(c, dim, value)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// race runs the write of other between the next Put attempt's
	// postings and its CAS, once.
	race := func(other record.IndexEntry) {
		raced := false
		x.SetBeforeCAS(func() {
			if raced {
				return
			}
			raced = true
			if _, err := x.Put(c, other, false); err != nil {
				t.Errorf("racing write: %v", err)
			}
		})
		t.Cleanup(func() { x.SetBeforeCAS(nil) })
	}

	old := entry("s1", 11, time.Time{}) // the source, mid-handoff
	old.DeploymentID, old.State = "dep-blue", record.StateHandoff
	newer := entry("s1", 12, time.Time{}) // the target, active
	newer.DeploymentID = "dep-green"
	race(newer)
	put(t, x, old, kv.IndexOlder)
	if b, h, bh, g := count(subjects.DimDep, "dep-blue"), count(subjects.DimState, "handoff"),
		count(subjects.DimDepState, "dep-blue=handoff"), count(subjects.DimDep, "dep-green"); b != 0 || h != 0 || bh != 0 || g != 1 {
		t.Fatalf("after a lost race: dep-blue %d handoff %d dep-blue=handoff %d dep-green %d; want 0 0 0 1", b, h, bh, g)
	}

	// A first write loses its create to another writer's, then wins:
	// its first attempt's postings were filed under its own creation
	// time (now), its second under the stored one.
	first := entry("s2", 5, t0)
	first.State = record.StatePaused
	second := entry("s2", 6, time.Time{})
	race(first)
	put(t, x, second, kv.IndexWritten)
	if a, p, all := count(subjects.DimDep, "dep-a"), count(subjects.DimState, "paused"), count(subjects.DimAll, subjects.AllValue); a != 1 || p != 0 || all != 2 {
		t.Fatalf("after a lost create then a win: dep-a %d paused %d all %d; want 1 0 2", a, p, all)
	}
	if ids := listAll(t, x, kv.IndexQuery{Deployment: "dep-a"}, 10); !slices.Equal(ids, []string{"s2"}) {
		t.Fatalf("deployment=dep-a: %v", ids)
	}
}

// TestIndexUncertainWriteLeavesNoPosting: a write whose CAS landed but
// whose answer was lost (a leader election) is tried again by Write; the
// retry finds its own entry unchanged and must still remove the postings
// of the entry the first try replaced.
func TestIndexUncertainWriteLeavesNoPosting(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	put(t, x, entry("s1", 10, t0), kv.IndexWritten) // dep-a, active
	lost := false
	x.SetAfterCAS(func() error {
		if lost {
			return nil
		}
		lost = true
		return errors.New("answer lost")
	})
	t.Cleanup(func() { x.SetAfterCAS(nil) })
	moved := entry("s1", 11, t0)
	moved.DeploymentID = "dep-b"
	if err := x.Write(c, moved); err != nil || !lost {
		t.Fatalf("write: %v (lost answer %v)", err, lost)
	}
	for dim, want := range map[string]int{"dep-a": 0, "dep-b": 1} {
		if n, err := x.Count(c, subjects.DimDep, dim); err != nil || n != want {
			t.Fatalf("count %s = %d %v, want %d", dim, n, err, want)
		}
	}
	if n, err := x.Count(c, subjects.DimDepState, "dep-a=active"); err != nil || n != 0 {
		t.Fatalf("count dep-a=active = %d %v, want 0", n, err)
	}
}

// TestIndexErase: a delete's erase removes the session's entry and every
// posting of it, a stale one its entry no longer lists too (a write a
// crash interrupted), and, with the entry already gone, what the creation
// time finds; another session's postings stay.
func TestIndexErase(t *testing.T) {
	x, c := openIndex(t), ctx(t)
	e, other := entry("s1", 5, t0), entry("s2", 3, t0)
	put(t, x, e, kv.IndexWritten)
	put(t, x, other, kv.IndexWritten)
	stale := e
	stale.State, stale.Tags = record.StatePaused, map[string]string{"tenant": "acme"}
	if err := x.AddPostings(c, kv.Postings(stale)); err != nil {
		t.Fatal(err)
	}
	if err := x.Erase(c, "s1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	left := func(id string) []string {
		var out []string
		keys, err := x.AllKeys(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if strings.HasSuffix(k, "."+id) {
				out = append(out, k)
			}
		}
		return out
	}
	if l := left("s1"); len(l) != 0 {
		t.Fatalf("erased session's keys left: %v", l)
	}
	if l := left("s2"); len(l) != len(kv.Postings(other))+1 {
		t.Fatalf("the other session's keys: %v, want its entry and %d postings", l, len(kv.Postings(other)))
	}
	// Entry gone already (a delete repeated after a crash): the creation
	// time finds what is left.
	if err := x.AddPostings(c, kv.Postings(e)); err != nil {
		t.Fatal(err)
	}
	if err := x.Erase(c, "s1", t0); err != nil {
		t.Fatal(err)
	}
	if l := left("s1"); len(l) != 0 {
		t.Fatalf("postings left after an erase without entry: %v", l)
	}
}
