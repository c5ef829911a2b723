package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
)

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
