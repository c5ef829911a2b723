package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/baton-rt/baton/runtime"
)

// FileLog is an execution log appended to a file, one JSON line per step
// (the fields of [runtime.Exec], with the time it was recorded), so tests that kill owner processes can
// prove from outside that no committed step ran twice.
type FileLog struct {
	mu sync.Mutex
	f  *os.File
}

var _ runtime.ExecLog = (*FileLog)(nil)

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
	b, _ := json.Marshal(runtime.Exec{SessionID: sessionID, StepKey: stepKey, Process: process, At: time.Now()})
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(b, '\n'))
	_ = l.f.Sync()
}

// Close closes the file.
func (l *FileLog) Close() error { return l.f.Close() }

// ReadFileLog reads every entry of a log written by FileLog.
func ReadFileLog(path string) ([]runtime.Exec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []runtime.Exec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e runtime.Exec
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Effect is one real execution of a journaled call of the /effects
// directive, as the effects log records it.
type Effect struct {
	SessionID string `json:"sessionId"`
	StepKey   string `json:"stepKey"`
	Call      int    `json:"call"`
	Key       string `json:"key"`
}

// EffectsLog is the /effects directive's log of real call executions
// (not replays), appended to a file, one JSON line per execution
// ({"sessionId","stepKey","call","key"}), synced so it survives a SIGKILL.
type EffectsLog struct {
	mu sync.Mutex
	f  *os.File
}

// OpenEffectsLog opens (creating or appending to) the effects log at path.
func OpenEffectsLog(path string) (*EffectsLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &EffectsLog{f: f}, nil
}

// Record appends one execution.
func (l *EffectsLog) Record(e Effect) {
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(b, '\n'))
	_ = l.f.Sync()
}

// ReadEffectsLog reads every execution an EffectsLog recorded.
func ReadEffectsLog(path string) ([]Effect, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Effect
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e Effect
		if err := json.Unmarshal(line, &e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}
