package memory_test

import (
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/conformance"
	"github.com/baton-rt/baton/runtime/session/memory"
)

// The in-memory ports pass the same suites as the JetStream ones
// (runtime/pool's TestConformance).
func TestConformance(t *testing.T) {
	conformance.Records(t, func(*testing.T) conformance.RecordStore { return memory.NewRecords() })
	conformance.Handoff(t, func(*testing.T) conformance.HandoffStore { return memory.NewRecords() })
	conformance.Inbox(t, func(*testing.T) conformance.InboxTarget {
		ib := memory.NewInbox()
		return conformance.InboxTarget{Inbox: ib, Backlog: ib,
			Publish: func(_ *testing.T, tok string, data []byte) uint64 { return ib.Publish(tok, data) }}
	})
	conformance.Appender(t, func(*testing.T) session.Appender { return memory.NewEvents().Appender("s1") })
	conformance.Blobs(t, func(*testing.T) session.Blobs { return memory.NewBlobs() })
	conformance.Journal(t, func(*testing.T) session.JournalStore { return memory.NewJournal() })
	conformance.Index(t, func(*testing.T) conformance.IndexTarget {
		x := memory.NewIndex()
		return conformance.IndexTarget{Index: x, Get: func(_ *testing.T, id string) (record.IndexEntry, bool) { return x.Get(id) }}
	})
}
