package kv

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Two derived indexes in the owners bucket let the owners' orphan sweep
// find its work without reading every session record (docs/kv-records.md):
// the processes that may own sessions, by deployment, and the quarantined
// sessions. Like a process's session index, both are hints: every action
// they lead to is decided by a CAS on the record or the lease, so a stale
// entry costs a read, and an entry is written before the state it points
// at.

// processEntry is the value of proc.<deploymentID>.<processID>.
type processEntry struct {
	ProcessID    string    `json:"processId"`
	DeploymentID string    `json:"deploymentId"`
	RegisteredAt time.Time `json:"registeredAt"`
}

// quarantineEntry is the value of quarantined.<deploymentID>.<sessionID>.
type quarantineEntry struct {
	SessionID    string    `json:"sessionId"`
	DeploymentID string    `json:"deploymentId"`
	AddedAt      time.Time `json:"addedAt"`
}

func processKey(deploymentID, processID string) (string, error) {
	if err := subjects.ValidateDeployment(deploymentID); err != nil {
		return "", invalid("process registration: %w", err)
	}
	if err := validProcess(processID); err != nil {
		return "", err
	}
	return subjects.ProcessKey(deploymentID, processID), nil
}

func quarantineKey(deploymentID, sessionID string) (string, error) {
	if err := subjects.ValidateDeployment(deploymentID); err != nil {
		return "", invalid("quarantine index: %w", err)
	}
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return "", invalid("quarantine index %s: %w", deploymentID, err)
	}
	return subjects.QuarantineKey(deploymentID, sessionID), nil
}

// RegisterProcess records that processID, an owner process of
// deploymentID, may own sessions: written before its first index entry,
// so a sweep that lists a deployment's registrations finds every process
// whose index may hold sessions, also one that died while no peer watched
// its lease. Idempotent.
func (s *Store) RegisterProcess(ctx context.Context, deploymentID, processID string) error {
	key, err := processKey(deploymentID, processID)
	if err != nil {
		return err
	}
	return s.putHint(ctx, key, processEntry{ProcessID: processID, DeploymentID: deploymentID, RegisteredAt: s.now()})
}

// UnregisterProcess removes a registration: once the process's index is
// empty (its own clean stop, or an adoption of all of it). Removing a
// missing one is not an error.
func (s *Store) UnregisterProcess(ctx context.Context, deploymentID, processID string) error {
	key, err := processKey(deploymentID, processID)
	if err != nil {
		return err
	}
	return s.purgeHint(ctx, key)
}

// ListProcesses returns the registered processes of deploymentID, sorted:
// one listing of the keys under proc.<deploymentID>., however many
// sessions there are. A listing is a hint: on a cluster it may trail a
// write made a moment before.
func (s *Store) ListProcesses(ctx context.Context, deploymentID string) ([]string, error) {
	if err := subjects.ValidateDeployment(deploymentID); err != nil {
		return nil, invalid("process registrations: %w", err)
	}
	var ids []string
	err := s.listHints(ctx, subjects.ProcessKeys(deploymentID), func(key string) {
		if dep, pid, err := subjects.ParseProcessKey(key); err == nil && dep == deploymentID {
			ids = append(ids, pid)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// AddQuarantined records that deploymentID quarantines sessionID: written
// before the quarantine's CAS on the record. Idempotent.
func (s *Store) AddQuarantined(ctx context.Context, deploymentID, sessionID string) error {
	key, err := quarantineKey(deploymentID, sessionID)
	if err != nil {
		return err
	}
	return s.putHint(ctx, key, quarantineEntry{SessionID: sessionID, DeploymentID: deploymentID, AddedAt: s.now()})
}

// RemoveQuarantined removes an entry once its record is no longer
// quarantined (ended or retried). Removing a missing one is not an error.
func (s *Store) RemoveQuarantined(ctx context.Context, deploymentID, sessionID string) error {
	key, err := quarantineKey(deploymentID, sessionID)
	if err != nil {
		return err
	}
	return s.purgeHint(ctx, key)
}

// Quarantined is one entry of the quarantine index.
type Quarantined struct {
	DeploymentID string // the deployment that quarantined it
	SessionID    string
}

// ListQuarantined returns every entry of the quarantine index, sorted by
// deployment and session: one listing of the keys under quarantined. A
// listing is a hint: on a cluster it may trail a write made a moment
// before.
func (s *Store) ListQuarantined(ctx context.Context) ([]Quarantined, error) {
	var out []Quarantined
	err := s.listHints(ctx, subjects.QuarantineKeys(), func(key string) {
		if dep, sid, err := subjects.ParseQuarantineKey(key); err == nil {
			out = append(out, Quarantined{DeploymentID: dep, SessionID: sid})
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Quarantined) int {
		return cmp.Or(strings.Compare(a.DeploymentID, b.DeploymentID), strings.Compare(a.SessionID, b.SessionID))
	})
	return slices.Compact(out), nil
}
