package runtime

import (
	"sync"
	"time"
)

// ExecLog records which steps ran in which process, so tests can prove that
// no committed step ran twice.
type ExecLog interface {
	Record(sessionID, stepKey, process string)
}

// Exec is one recorded step execution.
type Exec struct {
	SessionID string
	StepKey   string
	Process   string
	At        time.Time // when the step was recorded, just before it ran
}

// MemLog is an in-memory [ExecLog], safe for concurrent use.
type MemLog struct {
	mu      sync.Mutex
	entries []Exec
}

// Record implements [ExecLog].
func (l *MemLog) Record(sessionID, stepKey, process string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, Exec{SessionID: sessionID, StepKey: stepKey, Process: process, At: time.Now()})
}

// Entries returns a copy of the log.
func (l *MemLog) Entries() []Exec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Exec(nil), l.entries...)
}

// Count returns how often the step ran for the session.
func (l *MemLog) Count(sessionID, stepKey string) int {
	n := 0
	for _, e := range l.Entries() {
		if e.SessionID == sessionID && e.StepKey == stepKey {
			n++
		}
	}
	return n
}
