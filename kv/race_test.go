package kv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

const racers = 32

// race runs racers calls of try at once (released together) and returns
// their revisions and errors, indexed by racer.
func race(try func(i int) (uint64, error)) ([]uint64, []error) {
	revs, errs := make([]uint64, racers), make([]error, racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range racers {
		done.Go(func() {
			start.Wait()
			revs[i], errs[i] = try(i)
		})
	}
	start.Done()
	done.Wait()
	return revs, errs
}

// oneWinner checks exactly one racer won and every loser got an
// *record.OwnedError; it returns the winner and the losers' errors.
func oneWinner(t *testing.T, round int, revs []uint64, errs []error) (int, []*record.OwnedError) {
	t.Helper()
	winner := -1
	var losers []*record.OwnedError
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
			}
			winner = i
			continue
		}
		losers = append(losers, mustOwned(t, err))
	}
	if winner < 0 {
		t.Fatalf("round %d: nobody won: %v", round, errs[0])
	}
	for _, oe := range losers {
		if oe.Revision != 0 && oe.Revision != revs[winner] {
			t.Fatalf("round %d: loser saw holder at %d, winner wrote %d", round, oe.Revision, revs[winner])
		}
	}
	return winner, losers
}

// roundCtx bounds one round (the soak runs 1,000 of them).
func roundCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// stores opens one Store per node (three on the cluster), so racers write
// through different servers.
func stores(t *testing.T, open opener) []*kv.Store {
	return []*kv.Store{open(t, 0), open(t, 1), open(t, 2)}
}

// testSessionClaimRace: 32 goroutines create one session record; exactly one
// wins. Every other round the record is then deleted and raced for again,
// which takes the over-a-delete-marker path of a create.
func testSessionClaimRace(t *testing.T, open opener) {
	sts := stores(t, open)
	for round := range testsize.Pick(50, 1000) {
		c, cancel := roundCtx()
		defer cancel()
		id := uid("race")
		for pass := range 1 + round%2 {
			revs, errs := race(func(i int) (uint64, error) {
				return sts[i%len(sts)].CreateSession(c, sessionRec(id, fmt.Sprintf("run%d", i)))
			})
			w, losers := oneWinner(t, round, revs, errs)
			for _, oe := range losers {
				if oe.Owner != "" && oe.Owner != fmt.Sprintf("run%d", w) {
					t.Fatalf("round %d: loser names owner %s, winner is run%d", round, oe.Owner, w)
				}
			}
			if pass == 0 && round%2 == 1 {
				if err := sts[0].DeleteSession(c, id, revs[w]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// testAliasClaimRace: 32 sessions claim one alias; exactly one wins and the
// losers' errors name the winning session. Every other round the hook is
// deleted and raced for again; a tombstone is then still taken.
func testAliasClaimRace(t *testing.T, open opener) {
	sts := stores(t, open)
	for round := range testsize.Pick(50, 1000) {
		c, cancel := roundCtx()
		defer cancel()
		alias := fmt.Sprintf("C123.%s", uid("thread"))
		tok, err := subjects.EncodeToken(alias)
		if err != nil {
			t.Fatal(err)
		}
		owner := func(i int) string { return fmt.Sprintf("sess-%d-%d", round, i) }
		var revs []uint64
		var w int
		for pass := range 1 + round%2 {
			var errs []error
			revs, errs = race(func(i int) (uint64, error) {
				return sts[i%len(sts)].CreateHook(c, record.Hook{Token: tok, Address: alias, SessionID: owner(i), WireV: 1})
			})
			var losers []*record.OwnedError
			w, losers = oneWinner(t, round, revs, errs)
			for _, oe := range losers {
				if oe.SessionID != "" && oe.SessionID != owner(w) {
					t.Fatalf("round %d: loser names %s, winner is %s", round, oe.SessionID, owner(w))
				}
			}
			if pass == 0 && round%2 == 1 {
				if err := sts[0].DeleteHook(c, tok, revs[w]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if round%10 == 0 {
			assertTombstoneTaken(t, c, sts[1], tok, revs[w], owner(w))
		}
	}
}

func assertTombstoneTaken(t *testing.T, c context.Context, st *kv.Store, tok string, rev uint64, owner string) {
	t.Helper()
	if _, err := st.Tombstone(c, tok, rev); err != nil {
		t.Fatalf("tombstone: %v", err)
	}
	_, err := st.CreateHook(c, record.Hook{Token: tok, SessionID: "late"})
	if oe := mustOwned(t, err); oe.SessionID != owner || !oe.Ended {
		t.Fatalf("claim of a tombstoned alias: %+v", oe)
	}
}
