package wire

import (
	"errors"
	"fmt"
	"slices"
)

// Applied is the session record's account of which inbox commands have been
// applied. One position is not enough: steering and cancellation are applied
// out of arrival order.
//
// Inbox sequences are stream sequences of one stream shared by every session,
// so a session's own sequences have gaps. Low is the lowest sequence that may
// still hold an unapplied command of this session: every command of the
// session below Low has been applied. Above holds the applied sequences above
// Low, ascending. A recreated consumer starts at Low and skips every
// redelivered command for which Has is true; processed commands may be purged
// below Low.
//
// IDs remembers the most recent applied command IDs (at most MaxAppliedIDs,
// oldest first) for deduplication beyond the stream's duplicate window.
//
// The zero value means nothing has been applied (Low is taken as 1).
type Applied struct {
	Low   uint64   `json:"low" jsonschema:"minimum=1"`
	Above []uint64 `json:"above,omitempty"`
	IDs   []string `json:"ids,omitempty"`
}

// low returns Low, treating the zero value as 1.
func (a *Applied) low() uint64 { return max(a.Low, 1) }

// Has reports whether the command at inbox sequence seq has been applied.
func (a *Applied) Has(seq uint64) bool {
	if seq < a.low() {
		return true
	}
	_, found := slices.BinarySearch(a.Above, seq)
	return found
}

// HasID reports whether a command ID is among the remembered applied IDs.
func (a *Applied) HasID(id string) bool { return slices.Contains(a.IDs, id) }

// Record marks the command at seq with ID id as applied (Add plus the ID).
func (a *Applied) Record(seq uint64, id string) {
	a.Add(seq)
	if id != "" && !a.HasID(id) {
		a.IDs = append(a.IDs, id)
		if n := len(a.IDs) - MaxAppliedIDs; n > 0 {
			a.IDs = slices.Delete(a.IDs, 0, n)
		}
	}
}

// Add marks seq as applied. Low advances only through sequences known to be
// applied; gaps (other sessions' commands, not yet applied ones) stop it
// until AdvanceTo.
func (a *Applied) Add(seq uint64) {
	a.Low = a.low()
	if seq < a.Low {
		return
	}
	if i, found := slices.BinarySearch(a.Above, seq); !found {
		a.Above = slices.Insert(a.Above, i, seq)
	}
	a.compact()
}

// AdvanceTo raises Low to low. The caller asserts that no command of this
// session below low is unapplied: low is the sequence of the oldest command
// still in its queue, or, with an empty queue, one past the last stream
// sequence its consumer delivered.
func (a *Applied) AdvanceTo(low uint64) {
	a.Low = max(a.low(), low)
	a.compact()
}

// compact drops Above entries below Low and moves Low past applied ones.
func (a *Applied) compact() {
	i := 0
	for i < len(a.Above) && a.Above[i] <= a.Low {
		if a.Above[i] == a.Low {
			a.Low++
		}
		i++
	}
	a.Above = nilIfEmpty(slices.Delete(a.Above, 0, i))
}

// validate checks the invariants: Low ≥ 1, Above strictly ascending and
// above Low, at most MaxAppliedIDs non-empty IDs.
func (a *Applied) validate() error {
	if a.Low < 1 {
		return errors.New("applied.low must be at least 1")
	}
	prev := a.Low
	for _, s := range a.Above {
		if s <= prev {
			return fmt.Errorf("applied.above must be ascending and above low %d, has %d after %d", a.Low, s, prev)
		}
		prev = s
	}
	if len(a.IDs) > MaxAppliedIDs || slices.Contains(a.IDs, "") {
		return fmt.Errorf("applied.ids: at most %d non-empty IDs", MaxAppliedIDs)
	}
	return nil
}
