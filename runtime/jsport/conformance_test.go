package jsport_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/conformance"
	"github.com/oklog/ulid/v2"
)

// The JetStream ports pass the same suites as the in-memory ones
// (runtime/session/memory's TestConformance): kv's record store and
// appender, the inbox consumers, the state object store, the journal, the
// session index.
func TestConformance(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	e := h.Env(h.Server().URL())
	js, names, store := e.JS, e.Names, e.Store
	obs, err := js.ObjectStore(t.Context(), names.StateBucket())
	if err != nil {
		t.Fatal(err)
	}
	conformance.Records(t, func(*testing.T) conformance.RecordStore { return store })
	conformance.Handoff(t, func(*testing.T) conformance.HandoffStore { return store })
	conformance.Inbox(t, func(*testing.T) conformance.InboxTarget {
		return conformance.InboxTarget{Inbox: jsport.Inbox{JS: js, Names: names}, Backlog: kv.NewBacklog(js, names),
			Publish: func(t *testing.T, tok string, data []byte) uint64 {
				ack, err := js.Publish(t.Context(), names.Inbox(tok), data)
				if err != nil {
					t.Fatal(err)
				}
				return ack.Sequence
			}}
	})
	events := kv.NewStream(js, names.EventsStream())
	conformance.Appender(t, func(*testing.T) session.Appender {
		id := ulid.Make().String()
		return eventlog.NewAppender(js, events, names.Events(id), id)
	})
	conformance.Blobs(t, func(*testing.T) session.Blobs { return jsport.Blobs{Store: func() jsport.ObjectStore { return obs }} })
	journal, err := kv.OpenJournal(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Journal(t, func(*testing.T) session.JournalStore { return journal })
	index, err := kv.OpenIndex(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Index(t, func(*testing.T) conformance.IndexTarget {
		return conformance.IndexTarget{Index: index, Get: func(t *testing.T, id string) (record.IndexEntry, bool) {
			e, _, err := index.Get(t.Context(), id)
			if err != nil && !errors.Is(err, record.ErrNotFound) {
				t.Fatal(err)
			}
			return e, err == nil
		}}
	})
}
