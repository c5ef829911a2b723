package ingress

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Status answers GET /v1/sessions/{id}, as of the session's last commit.
type Status struct {
	SessionID    string `json:"sessionId"`
	OwnerRunID   string `json:"ownerRunId"`
	DeploymentID string `json:"deploymentId"`
	// OwnerLive says whether an owner will act on a command sent now: the
	// session's deployment has a live owner process, or the deployment
	// this ingress stamps has one and adopts the session (see Receipt).
	OwnerLive  bool     `json:"ownerLive"`
	Epoch      uint64   `json:"epoch"`
	State      string   `json:"state"` // active, handoff, hibernated, paused, ended, quarantined
	Idle       bool     `json:"idle"`
	QueueDepth int      `json:"queueDepth"`
	EventSeq   uint64   `json:"eventSeq"`
	Tokens     []string `json:"tokens"` // raw addresses: the session ID, then the aliases
	// Tags are the session's tags as of its last commit ({} when none).
	Tags map[string]string `json:"tags"`
	// BootAttempts counts the boot attempts since the session was last
	// settled (docs/driver.md, "Quarantine"); 0 for a healthy session.
	BootAttempts int `json:"bootAttempts"`
	// Quarantine is set while the state is quarantined.
	Quarantine *QuarantineStatus `json:"quarantine,omitempty"`
	// Usage is the session's total reported usage as of its last commit
	// (all members optional; zero when its agent reported none).
	Usage wire.Usage `json:"usage"`
	// Handles are the session's child handles as of its last commit, every
	// state (closed ones too); absent when it has none.
	Handles []HandleStatus `json:"handles,omitempty"`
	// ParentSessionID and Depth are set for a child session: the parent
	// that holds it and its delegation depth (absent for a root).
	ParentSessionID string `json:"parentSessionId,omitempty"`
	Depth           int    `json:"depth,omitempty"`
	// WaitingFor is everything the session waits for, one shape for every
	// kind (record.Wait): input, authorization, task, child, paused,
	// quarantined, handoff, step; empty when it waits for nothing.
	WaitingFor []record.Wait `json:"waitingFor"`
	// OwnerProcess is the owner process running it ("" when none does).
	OwnerProcess string `json:"ownerProcess"`
	// Why is the idle rule's reason it is not idle, as the drain report
	// gives it (busy, paused, input, authorization, task, child, queued,
	// quarantined, ended); "" when idle.
	Why string `json:"why"`
}

// HandleStatus is one child handle of a session: its name, the child
// session (absent before the child exists), the handle's state (active,
// parked, available, closed) and the child's deployment.
type HandleStatus struct {
	Handle         string `json:"handle"`
	ChildSessionID string `json:"childSessionId,omitempty"`
	State          string `json:"state"`
	DeploymentID   string `json:"deploymentId"`
}

// QuarantineStatus says why and since when a session is quarantined.
type QuarantineStatus struct {
	Attempts int       `json:"attempts"`
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
}

// maxQueueCount caps the commands QueueDepth counts (it is then a lower
// bound): counting reads the inbox one message at a time.
const maxQueueCount = 1000

// Status reads the session record (a direct get: a hint on a cluster) and
// its checkpoint.
//
//   - eventSeq, tokens: the checkpoint's last committed event seq and
//     claimed addresses.
//   - queueDepth: commands accepted into the session's inbox subjects that
//     the last commit does not record as applied (at or above Applied.Low and
//     not in Applied.Above), counted from the stream.
//   - idle: active or hibernated, no turn live, nothing awaited (input,
//     authorization, tasks, an active child handle or a descendant's wait),
//     not paused and queueDepth 0 — the docs/runtime.md rule as far as the
//     record can tell (record.CheckpointActivity).
//   - handles, parentSessionId, depth: the checkpoint's handles (all of
//     them, closed too) and its parent reference.
//
// A checkpoint this build cannot decode (a quarantined session's, say) is
// read as far as its stable members go (wire.PeekCheckpoint): the session
// is then not idle.
func (s *Server) Status(ctx context.Context, sessionID string) (Status, error) {
	if err := checkSessionID(sessionID); err != nil {
		return Status{}, err
	}
	a, err := s.topology(ctx)
	if err != nil {
		return Status{}, err
	}
	cur, err := a.sessionRecord(ctx, sessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Status{}, fail(ErrNotFound, "no session %s", sessionID)
	case err != nil:
		return Status{}, fail(ErrUnavailable, "read session %s: %v", sessionID, err)
	}
	rec := cur.Record
	if rec.IsDeleted() {
		return Status{}, deletedErr(sessionID)
	}
	cp, readable, err := readCheckpoint(rec)
	if err != nil {
		return Status{}, fail(ErrUnavailable, "session %s: checkpoint: %v", sessionID, err)
	}
	st := Status{
		SessionID: rec.SessionID, OwnerRunID: rec.OwnerRunID, DeploymentID: rec.DeploymentID,
		Epoch: rec.Epoch, State: string(rec.State), EventSeq: rec.EventSeq(cp.EventSeq), Tokens: cp.Tokens,
		BootAttempts: rec.BootAttempts, Usage: cp.Usage, Tags: cp.Tags,
	}
	if st.Tags == nil {
		st.Tags = map[string]string{}
	}
	if q := rec.Quarantine; q != nil && rec.Quarantined() {
		st.Quarantine = &QuarantineStatus{Attempts: q.Attempts, Error: q.Error, Since: q.Since}
	}
	if st.QueueDepth, err = s.queueDepthUpTo(ctx, a, cp, maxQueueCount); err != nil {
		return Status{}, fail(ErrUnavailable, "session %s: inbox: %v", sessionID, err)
	}
	st.Why = record.NotIdle(record.CheckpointActivity(rec, cp, st.QueueDepth > 0))
	if !readable && st.Why == "" {
		st.Why = wire.SkipBusy
	}
	st.Idle = st.Why == ""
	st.WaitingFor, st.OwnerProcess = record.WaitingFor(rec, cp), rec.OwnerProcess
	st.Handles, st.ParentSessionID, st.Depth = family(cp)
	stamp, _ := s.stamp(a)
	st.OwnerLive = s.ownerLive(a, rec.DeploymentID, stamp)
	return st, nil
}

// family is what a checkpoint says of the session's children and parent.
func family(cp wire.Checkpoint) (handles []HandleStatus, parent string, depth int) {
	for _, h := range cp.Handles {
		handles = append(handles, HandleStatus{Handle: h.Handle, ChildSessionID: h.ChildSessionID, State: h.State, DeploymentID: h.DeploymentID})
	}
	if cp.Parent != nil {
		parent, depth = cp.Parent.SessionID, cp.Parent.Depth
	}
	return handles, parent, depth
}

// readCheckpoint decodes the record's checkpoint, or, when this build
// cannot, peeks at its stable members (readable is then false).
func readCheckpoint(rec record.SessionRecord) (cp wire.Checkpoint, readable bool, err error) {
	cp, err = wire.DecodeCheckpoint(rec.Checkpoint)
	if err == nil {
		return cp, true, nil
	}
	p, perr := wire.PeekCheckpoint(rec.Checkpoint)
	if perr != nil {
		return wire.Checkpoint{}, false, err
	}
	cp = wire.Checkpoint{SessionID: p.SessionID, EventSeq: p.EventSeq, Tokens: p.Tokens, Applied: p.Applied}
	if len(cp.Tokens) == 0 {
		cp.Tokens = []string{rec.SessionID}
	}
	return cp, false, nil
}

// queueDepthUpTo counts the unapplied commands on the session's inbox
// subjects, up to limit.
func (s *Server) queueDepthUpTo(ctx context.Context, a *attached, cp wire.Checkpoint, limit int) (int, error) {
	inbox := a.inbox
	n := 0
	for _, addr := range cp.Tokens {
		tok, err := subjects.EncodeToken(addr)
		if err != nil {
			continue
		}
		c, err := s.countFrom(ctx, inbox, s.cfg.Names.Inbox(tok), max(cp.Applied.Low, 1), cp.Applied.Above, limit-n)
		if err != nil {
			return 0, err
		}
		if n += c; n >= limit {
			break
		}
	}
	return n, nil
}

// countFrom counts the messages of subject from stream sequence seq on,
// skipping applied sequences, up to limit.
func (s *Server) countFrom(ctx context.Context, st jetstream.Stream, subject string, seq uint64, applied []uint64, limit int) (int, error) {
	n := 0
	for n < limit {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if _, done := slices.BinarySearch(applied, m.Sequence); !done {
			n++
		}
		seq = m.Sequence + 1
	}
	return n, nil
}
