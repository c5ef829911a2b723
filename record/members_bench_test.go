package record_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-rt/baton/record"
)

func benchRecord() record.SessionRecord {
	cp, _ := json.Marshal(map[string]any{"stateV": 1, "history": strings.Repeat("x", 8<<10)})
	return record.SessionRecord{SessionID: "01JAAAAAAAAAAAAAAAAAAAAAAA", DeploymentID: "v1", State: record.StateActive,
		Epoch: 3, OwnerRunID: "r1", Writer: "r1", WriteCounter: 9, Checkpoint: cp}
}

func BenchmarkEncodeSession(b *testing.B) {
	r := benchRecord()
	for b.Loop() {
		if _, err := record.EncodeSession(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSession(b *testing.B) {
	data, _ := record.EncodeSession(benchRecord())
	for b.Loop() {
		if _, err := record.DecodeSession(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The same without the kept members' methods: what the store did before.
type plainRecord struct {
	SessionID    string          `json:"sessionId"`
	OwnerRunID   string          `json:"ownerRunId"`
	DeploymentID string          `json:"deploymentId"`
	Epoch        uint64          `json:"epoch"`
	State        string          `json:"state"`
	Writer       string          `json:"writer"`
	WriteCounter uint64          `json:"writeCounter"`
	Checkpoint   json.RawMessage `json:"checkpoint,omitempty"`
}

func BenchmarkPlainMarshal(b *testing.B) {
	r := benchRecord()
	p := plainRecord{r.SessionID, r.OwnerRunID, r.DeploymentID, r.Epoch, string(r.State), r.Writer, r.WriteCounter, r.Checkpoint}
	for b.Loop() {
		if _, err := json.Marshal(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlainUnmarshal(b *testing.B) {
	data, _ := record.EncodeSession(benchRecord())
	for b.Loop() {
		var p plainRecord
		if err := json.Unmarshal(data, &p); err != nil {
			b.Fatal(err)
		}
	}
}
