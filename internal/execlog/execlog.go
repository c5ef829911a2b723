package execlog

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Exec is one recorded step execution.
type Exec struct {
	SessionID string
	StepKey   string
	Process   string
	At        time.Time // when the step was recorded, just before it ran
}

// MemLog is an in-memory execution log, safe for concurrent use.
type MemLog struct {
	mu      sync.Mutex
	entries []Exec
}

// Record records that the step ran in process.
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

// FileLog is an execution log appended to a file, one JSON line per step
// (the fields of [Exec], with the time it was recorded), so tests that kill owner processes can
// prove from outside that no committed step ran twice.
type FileLog struct {
	mu sync.Mutex
	f  *os.File
}

// OpenFileLog opens (creating or appending to) the log at path.
func OpenFileLog(path string) (*FileLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &FileLog{f: f}, nil
}

// Record appends one line and syncs it, so it survives a SIGKILL.
func (l *FileLog) Record(sessionID, stepKey, process string) {
	b, _ := json.Marshal(Exec{SessionID: sessionID, StepKey: stepKey, Process: process, At: time.Now()})
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(b, '\n'))
	_ = l.f.Sync()
}

// Close closes the file.
func (l *FileLog) Close() error { return l.f.Close() }

// ReadFileLog reads every entry of a log written by FileLog.
func ReadFileLog(path string) ([]Exec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Exec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Exec
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
