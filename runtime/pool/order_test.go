package pool

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// A session's addresses form one FIFO in stream order: deliveries to two
// aliases and the session ID, interleaved (and piling up behind a running
// step), are applied in publish order.
func TestAliasesMergedInStreamOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1", "alias-A", "alias-B").SessionID

	addrs := []string{"alias-A", "alias-B", id}
	var want []string
	var seqs []uint64
	send := func(addr, text string) {
		c := harness.WithID(fmt.Sprintf("m%02d", len(want)), harness.Deliver(text))
		seqs = append(seqs, e.Send(addr, c))
		want = append(want, c.ID)
	}
	send(id, "/sleep 300ms")
	for i := range 24 {
		send(addrs[i%3], fmt.Sprintf("msg %d via %s", i, addrs[i%3]))
	}
	evs := e.WaitFor(id, "every delivery applied", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCompleted) == len(want)
	})
	e.CheckStream(evs)
	order := e.Applied(evs)
	var got []string
	for i, a := range order {
		got = append(got, a.CommandID)
		if i > 0 && a.Seq <= order[i-1].Seq {
			t.Fatalf("applied out of stream order: %+v", order)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("applied %q, want publish order %q", got, want)
	}
	for i, a := range order {
		if a.Seq != seqs[i] {
			t.Fatalf("%s applied with seq %d, published at %d", a.CommandID, a.Seq, seqs[i])
		}
	}
	outs := harness.Outputs(evs)
	for i := range 24 {
		if outs[i+1] != fmt.Sprintf("msg %d via %s", i, addrs[i%3]) {
			t.Fatalf("outputs %q", outs)
		}
	}
}

// A command published to a new alias the instant its hook exists — polled
// in a tight loop, so it usually lands before the consumer was recreated
// over the alias — is applied exactly once.
func TestAliasPublishedAtHookCreation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	const rounds = 3
	for r := range rounds {
		alias := fmt.Sprintf("race-X%d", r)
		tok, _ := subjects.EncodeToken(alias)
		e.Send(id, harness.Deliver("/alias "+alias))
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		for {
			_, _, err := e.Store.GetHook(ctx, tok)
			if err == nil {
				break
			}
			if !errors.Is(err, record.ErrNotFound) {
				cancel()
				t.Fatalf("hook %s never appeared: %v", alias, err)
			}
		}
		cancel()
		e.Send(alias, harness.WithID(fmt.Sprintf("first-%d", r), harness.Deliver("first via "+alias)))
		e.Send(id, harness.WithID(fmt.Sprintf("next-%d", r), harness.Deliver(fmt.Sprintf("next %d", r))))
	}
	evs := e.WaitOutput(id, fmt.Sprintf("next %d", rounds-1))
	checkAliasRounds(t, evs, rounds)
}

// The same, deterministically inside the window: the fault hook runs after
// the alias's hook was created and before the consumer is recreated. It
// publishes to the alias and then to the session ID, and waits until the
// old consumer (which does not see the alias) has delivered the second one:
// the owner must still apply the alias's command, once, and first.
func TestAliasPublishedBeforeConsumerRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hooked := make(chan struct{}, 1)
	e.owner("v1", "p1", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.AliasHooked, failpoint.Do(func(a failpoint.Args) {
			sessionID, alias := a.SessionID, a.Detail
			defer func() { hooked <- struct{}{} }()
			ctx := context.Background()
			tok, _ := subjects.EncodeToken(alias)
			if _, _, err := e.Store.GetHook(ctx, tok); err != nil {
				t.Errorf("AliasHooked before the hook of %s exists: %v", alias, err)
				return
			}
			if _, _, err := e.SendTo(context.Background(), alias, harness.WithID("first-0", harness.Deliver("first via "+alias))); err != nil {
				t.Error(err)
				return
			}
			_, seq, err := e.SendTo(context.Background(), sessionID, harness.WithID("next-0", harness.Deliver("next 0")))
			if err != nil {
				t.Error(err)
				return
			}
			cons, err := e.JS.Consumer(ctx, e.Names.InboxStream(), subjects.Consumer(sessionID, 1))
			if err != nil {
				t.Errorf("old consumer: %v", err)
				return
			}
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) {
				info, err := cons.Info(ctx)
				if err == nil && info.AckFloor.Stream >= seq {
					return // the old consumer handed next-0 to the owner
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("old consumer never delivered seq %d", seq)
		}))
	})
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/alias race-X0"))
	select {
	case <-hooked:
	case <-time.After(wait):
		t.Fatal("alias never claimed")
	}
	evs := e.WaitOutput(id, "next 0")
	checkAliasRounds(t, evs, 1)
}

// checkAliasRounds: every round's alias command applied exactly once and
// before the session-ID command published after it.
func checkAliasRounds(t *testing.T, evs []wire.Event, rounds int) {
	t.Helper()
	applied := harness.ByID(harness.For(t).CheckStream(evs))
	for r := range rounds {
		first, next := fmt.Sprintf("first-%d", r), fmt.Sprintf("next-%d", r)
		if _, ok := applied[first]; !ok {
			t.Fatalf("%s (published to the new alias) not applied: %s", first, harness.Kinds(evs))
		}
		if applied[first] >= applied[next] || slices.IndexFunc(evs, harness.IsApplied(first)) > slices.IndexFunc(evs, harness.IsApplied(next)) {
			t.Fatalf("%s (seq %d) not applied before %s (seq %d)", first, applied[first], next, applied[next])
		}
	}
}
