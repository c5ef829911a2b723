package kv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
)

// TestSettleCAS: a lost CAS is sent again only while the leader still shows
// the key at the expected revision (the replicated stream's transient 10164),
// at most casAttempts times; a key that moved is a conflict at once.
func TestSettleCAS(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openInternal(t, c)
	rev, err := st.sessions.kv.Put(c, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	lost := fmt.Errorf("%w: transient", record.ErrConflict)

	calls := 0
	n, err := st.settleCAS(c, st.sessions, "k", rev, func() (uint64, error) {
		if calls++; calls < 3 {
			return 0, lost
		}
		return st.sessions.kv.Update(c, "k", []byte("v2"), rev)
	})
	if err != nil || calls != 3 || n != rev+1 {
		t.Fatalf("transient conflicts: rev %d, %d calls, %v", n, calls, err)
	}

	calls = 0
	if _, err = st.settleCAS(c, st.sessions, "k", n, func() (uint64, error) { calls++; return 0, lost }); !errors.Is(err, record.ErrConflict) || calls != casAttempts {
		t.Fatalf("a conflict that never settles: %d calls, %v", calls, err)
	}

	calls = 0
	if _, err = st.settleCAS(c, st.sessions, "k", rev, func() (uint64, error) { calls++; return 0, lost }); !errors.Is(err, record.ErrConflict) || calls != 1 {
		t.Fatalf("a key that moved: %d calls, %v", calls, err)
	}
}
