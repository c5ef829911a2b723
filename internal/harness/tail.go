package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Tail reads every session's events from the events stream with one
// ordered consumer for a whole run, as they are appended: each session's
// events in stream order, exactly as stored (a re-published copy is kept;
// see Dedupe).
type Tail struct {
	cc       jetstream.ConsumeContext
	mu       sync.Mutex
	evs      map[string][]wire.Event
	applied  map[string]map[uint64]int // session → inbox seq → command.applied count
	problems []string
	last     uint64 // stream sequence of the last message read
}

// TailEvents starts the tail at the stream's beginning; Stop ends it.
func TailEvents(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Tail, error) {
	t := &Tail{evs: map[string][]wire.Event{}, applied: map[string]map[uint64]int{}}
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.EventsAll()},
	})
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", names.EventsStream(), err)
	}
	if t.cc, err = cons.Consume(t.add); err != nil {
		return nil, fmt.Errorf("tail %s: %w", names.EventsStream(), err)
	}
	return t, nil
}

func (t *Tail) add(m jetstream.Msg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if md, err := m.Metadata(); err == nil {
		t.last = md.Sequence.Stream
	}
	ev, err := wire.DecodeEvent(nil, m.Data())
	if err != nil {
		t.problems = append(t.problems, fmt.Sprintf("event on %s does not decode: %v", m.Subject(), err))
		return
	}
	t.evs[ev.SessionID] = append(t.evs[ev.SessionID], ev)
	if ev.Kind != wire.EventCommandApplied {
		return
	}
	var d wire.CommandApplied
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.problems = append(t.problems, fmt.Sprintf("command.applied %s: %v", ev.Data, err))
		return
	}
	if t.applied[ev.SessionID] == nil {
		t.applied[ev.SessionID] = map[uint64]int{}
	}
	t.applied[ev.SessionID][d.Seq]++
}

// Stop ends the tail.
func (t *Tail) Stop() { t.cc.Stop() }

// Events is the session's events read so far.
func (t *Tail) Events(sid string) []wire.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.evs[sid])
}

// Problems lists the events that did not decode.
func (t *Tail) Problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.problems)
}

// IsApplied reports whether the command at inbox seq of sid was applied.
func (t *Tail) IsApplied(sid string, seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applied[sid][seq] > 0
}

// WaitApplied polls until the command at inbox seq of sid is applied.
func (t *Tail) WaitApplied(ctx context.Context, sid string, seq uint64, timeout time.Duration) error {
	if err := Poll(ctx, timeout, func() bool { return t.IsApplied(sid, seq) }); err != nil {
		return fmt.Errorf("command seq %d of %s not applied: %w; events %s", seq, sid, err, Trace(t.Events(sid)))
	}
	return nil
}

// WaitCaughtUp polls until the tail has read everything the stream held
// when it was called.
func (t *Tail) WaitCaughtUp(ctx context.Context, js jetstream.JetStream, names subjects.Names, timeout time.Duration) error {
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	return Poll(ctx, timeout, func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.last >= last
	})
}

// Dedupe drops the re-published copies of a session's events (the same
// seq again, identical) and sorts the rest by seq; two different events
// with one seq are an error. It returns how many copies it dropped.
func Dedupe(evs []wire.Event) ([]wire.Event, int, error) {
	seen := map[uint64]wire.Event{}
	var out []wire.Event
	dups := 0
	for _, e := range evs {
		if p, ok := seen[e.Seq]; ok {
			if p.Kind != e.Kind || p.OwnerRunID != e.OwnerRunID || string(p.Data) != string(e.Data) {
				return nil, dups, fmt.Errorf("session %s: two different events with seq %d: %s and %s", e.SessionID, e.Seq, p.Kind, e.Kind)
			}
			dups++
			continue
		}
		seen[e.Seq] = e
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, dups, nil
}

// Settled reports whether every turn the session's events started has
// ended (turn.completed or turn.cancelled): no step of it is in flight or
// still due. With every accepted delivery applied (a delivery is applied as
// it starts its turn, docs/runtime.md R4), a settled session runs nothing
// until its next command.
func (t *Tail) Settled(sid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	open := map[string]bool{}
	for _, ev := range t.evs[sid] {
		var d struct {
			TurnID string `json:"turnId"`
		}
		switch ev.Kind {
		case wire.EventTurnStarted:
			if json.Unmarshal(ev.Data, &d) == nil {
				open[d.TurnID] = true
			}
		case wire.EventTurnCompleted, wire.EventTurnCancelled:
			if json.Unmarshal(ev.Data, &d) == nil {
				delete(open, d.TurnID)
			}
		}
	}
	return len(open) == 0
}

// WaitSettled polls until the session is Settled: a check of the steps
// that ran (the execution log) against the steps committed must not race
// the step of the last delivery's turn.
func (t *Tail) WaitSettled(ctx context.Context, sid string, timeout time.Duration) error {
	if err := Poll(ctx, timeout, func() bool { return t.Settled(sid) }); err != nil {
		return fmt.Errorf("session %s not settled: %w; events %s", sid, err, Trace(t.Events(sid)))
	}
	return nil
}
