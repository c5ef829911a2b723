package session

import (
	"context"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// The ports a session talks to the outside through. JetStream implements
// them in the owner process (package runtime/pool, package kv); package
// runtime/session/memory implements them in memory, and
// runtime/session/conformance holds the suites both must pass.

// Records is the part of the record store a running session uses: its own
// record by revision CAS and leader read, and its address hooks. kv.Store
// implements it.
type Records interface {
	// UpdateSession writes rec if the record is still at rev and returns
	// the new revision; a stale rev is record.ErrConflict.
	UpdateSession(ctx context.Context, rec record.SessionRecord, rev uint64) (uint64, error)
	// Settle reads the record from the leader and reports whether it
	// carries the write (writer run, write counter): how a commit whose
	// reply was lost is settled.
	Settle(ctx context.Context, id, writer string, write uint64) (record.Session, bool, error)
	// SettleUpdate settles a write of rec at rev whose outcome is unknown:
	// rec's writer stamp on the leader → it landed (its revision); the
	// record still at rev → gate, then the same CAS again, settled the same
	// way; anything else → record.ErrConflict. It repeats failed reads and
	// writes at one pace until ctx ends (kv.Store.SettleUpdate).
	SettleUpdate(ctx context.Context, rec record.SessionRecord, rev uint64, gate func(context.Context) error) (uint64, error)
	// LeaderSession reads the record from the leader.
	LeaderSession(ctx context.Context, id string) (record.Session, error)
	// CreateHook creates an address hook; a live hook is *record.OwnedError.
	CreateHook(ctx context.Context, h record.Hook) (uint64, error)
	// GetHook reads a hook (record.ErrNotFound when there is none).
	GetHook(ctx context.Context, token string) (record.Hook, uint64, error)
	// Tombstone marks a hook's address ended, if the hook is still at rev.
	Tombstone(ctx context.Context, token string, rev uint64) (uint64, error)
}

// Index keeps a session's entry of the session index: derived, so a
// lost write costs nothing but a stale listing until the owners'
// reconciler heals it. An entry derived from an older record revision
// than the stored one is ignored. kv.Index implements it.
type Index interface {
	Write(ctx context.Context, e record.IndexEntry) error
}

// Cursor names an inbox reader: the consumer's name, the encoded tokens it
// filters on, and the first stream sequence it delivers (1: everything).
// Fresh marks a run's first consumer, whose name was never used: it may be
// created without deleting a predecessor of the same name first.
type Cursor struct {
	Name   string
	Tokens []string
	Start  uint64
	Fresh  bool
}

// Delivery is one inbox message as stored: its stream sequence, its bytes
// (a wire command, decoded by the session) and when it was stored.
type Delivery struct {
	Seq    uint64
	Data   []byte
	Stored time.Time
}

// Inbox is a session's merged FIFO over every address token: a reader
// delivers the messages of the cursor's tokens in stream order, from the
// cursor's start, one at a time.
type Inbox interface {
	// Open (re)creates the named cursor at c.Start and starts delivering.
	Open(ctx context.Context, c Cursor) (Reader, error)
	// Exists reports whether the named cursor still exists (false after a
	// server restart lost it, or a successor deleted it).
	Exists(ctx context.Context, name string) (bool, error)
	// Delete removes the named cursor; a missing one is not an error.
	Delete(ctx context.Context, name string) error
	// Purge removes the messages below seq on each token's subject.
	Purge(ctx context.Context, tokens []string, below uint64) error
	// Forget removes the messages at these sequences (applied commands
	// above the lowest unapplied one); a message already gone is not an
	// error.
	Forget(ctx context.Context, seqs []uint64) error
}

// MessageReader is an Inbox that also reads one message by its stream
// sequence: a handoff's successor reads its trigger so, while its cursor
// is created (jsport.Inbox implements it by a leader read).
type MessageReader interface {
	// Read returns the message at seq if it is on one of tokens' inbox
	// subjects; one on another subject, or none, is an error.
	Read(ctx context.Context, tokens []string, seq uint64) (Delivery, error)
}

// Reader is one open cursor.
type Reader interface {
	// Deliveries yields the messages in stream order.
	Deliveries() <-chan Delivery
	// Lost receives the error that ended delivery unexpectedly (the cursor
	// deleted, heartbeats missed); it is never closed.
	Lost() <-chan error
	// Close stops delivery; the cursor stays until Delete (or expiry).
	Close()
}

// Appender appends a session's committed events to its event stream,
// exactly once each and without gaps: an event already there is skipped, one
// that would leave a hole is refused (kv.ErrEventGap). eventlog.Appender
// implements it.
type Appender interface {
	Append(ctx context.Context, seq uint64, data []byte) error
	// AppendAll appends data[i] as the event with seq first+i, in order,
	// each as Append would: a commit's events, in as few round trips as
	// the stream allows.
	AppendAll(ctx context.Context, first uint64, data [][]byte) error
	// Last is the seq of the last event on the stream (0: none).
	Last(ctx context.Context) (uint64, error)
}

// Blobs is the object store of out-of-line content (history segments,
// large state, long texts), by name. Content is addressed by digest, so a
// Put of a name already stored may be skipped.
type Blobs interface {
	Put(ctx context.Context, name string, data []byte) error
	// Has reports whether name is stored.
	Has(ctx context.Context, name string) (bool, error)
	// Get reads name; a missing object is ErrBlobNotFound.
	Get(ctx context.Context, name string) ([]byte, error)
	// Delete removes name; a missing object is not an error.
	Delete(ctx context.Context, name string) error
}

// Inventory records which blobs each session owns and which shared history
// segments it refers to (kv.Inventory), so that what a session no longer
// refers to — and, at its delete, all it owns — is deleted without listing
// the object store. A key is written before its object and removed after.
type Inventory interface {
	// Own records that sessionID owns the blob of digest; pinned when an
	// event refers to it (it stays until the session is deleted).
	Own(ctx context.Context, sessionID, digest string, pinned bool) error
	// Pinned reports whether an event of sessionID refers to digest.
	Pinned(ctx context.Context, sessionID, digest string) (bool, error)
	// Owned lists the digests sessionID owns, pinned or not.
	Owned(ctx context.Context, sessionID string, pinned bool) ([]string, error)
	// Disown removes sessionID's unpinned record of digest.
	Disown(ctx context.Context, sessionID, digest string) error
	// RefSegment records that sessionID refers to history segment digest.
	RefSegment(ctx context.Context, sessionID, digest string) error
	// Referrers lists the sessions that refer to segment digest.
	Referrers(ctx context.Context, digest string) ([]string, error)
	// Unref removes sessionID's reference to segment digest.
	Unref(ctx context.Context, sessionID, digest string) error
	// KeepSegment records that segment digest is never deleted (it was
	// stored before the inventory; unrecorded sessions may share it).
	KeepSegment(ctx context.Context, digest string) error
}

// Timers arms and cancels a session's one timer: when it fires, a timeout
// command with the timer's ID reaches the session's inbox.
type Timers interface {
	// Arm (re-)publishes the session-lifetime timer; ArmDebounce the
	// debounce window's, on its own schedule. A re-publish replaces the
	// schedule it names.
	Arm(ctx context.Context, sessionID string, t runtime.Timer) error
	ArmDebounce(ctx context.Context, sessionID string, t runtime.Timer) error
	// Cancel cancels both.
	Cancel(ctx context.Context, sessionID string) error
}

// Backlog finds unprocessed commands by a leader read of the inbox:
// handoff.Backlog, which kv.Backlog implements.
type Backlog = handoff.Backlog

// What belongs to the owner process rather than the session comes in four
// ports, one per concern: Process (the lease, the process's index, its
// background goroutines, reconnects, drain and quarantine slot), Handoffs
// (the handoff transaction), Tasks (background tasks) and Sends (commands
// to other sessions). The owner process implements each with a part of
// its own; memory.Host implements all four for tests.

// Process is what a session asks of the process it runs in.
type Process interface {
	// LeaseValid reports whether the process holds a valid lease: a session
	// performs no effect without one.
	LeaseValid() bool
	// AwaitLease returns nil at once while the lease is valid. While the
	// process's renewal is overdue (paused) it waits until the renewal
	// lands (nil) or the process fences (an error wrapping ErrFenced), or
	// until ctx ends. Every gate of an effect calls it.
	AwaitLease(ctx context.Context) error
	// RemoveIndex drops the session from the process's index (it ended,
	// hibernated or moved).
	RemoveIndex(ctx context.Context, sessionID string) error
	// Go runs f in the background, in the process's serving context: work
	// that must not hold up the session (deleting a predecessor's cursor, a
	// superseded blob).
	Go(f func(ctx context.Context))
	// Reconnected is closed at the next reconnect of the process's
	// connection to NATS (cursors may have been lost).
	Reconnected() <-chan struct{}
	// Draining reports a graceful drain: sessions hibernate as soon as they
	// can.
	Draining() bool
	// Settled tells the process that the session committed with no boot
	// attempt pending: it did not kill the process (the quarantine slot is
	// free).
	Settled(sessionID string)
}

// Handoffs runs the handoff transaction (docs/handoff.md).
type Handoffs interface {
	// Handoff runs the transaction for req; ErrHandoffDisabled when the
	// process does not hand off.
	Handoff(ctx context.Context, req handoff.Request) (handoff.Result, error)
}

// Tasks starts background tasks.
type Tasks interface {
	// StartTask publishes a committed background task.
	StartTask(ctx context.Context, sessionID string, t runtime.TaskSpec) error
}

// Sends carries commands to other sessions (subagents).
type Sends interface {
	// Send performs a commit's sends to other sessions (runtime.SendCommands):
	// each encoded for the receiver's inbox version, published to its stable
	// inbox with the command ID as message ID, the receiver woken; a child
	// named with an alias is created first. It returns once every send is
	// stored (or dropped for an ended receiver), retrying otherwise —
	// except a send that creates a child and fails its first attempt (no
	// live owner of the child's deployment, or it is retired): that one
	// is returned pending, to be retried by SendPending.
	Send(ctx context.Context, from string, sends []runtime.Send) ([]runtime.Send, error)
	// SendPending retries a pending child-creating send, with backoff,
	// until it is stored (nil), ctx ends, or deadline passes or the
	// child's deployment is retired: then it publishes a failed
	// child.result (child_unavailable) for the delegation to from's own
	// inbox and returns ErrSendExpired.
	SendPending(ctx context.Context, from string, p runtime.PendingSend, deadline time.Time) error
	// Retired reports whether deployment is retired (a delegation to it
	// fails at once with child_unavailable).
	Retired(ctx context.Context, deployment string) (bool, error)
	// ReadsInbox reports whether deployment's owners read inbox version v
	// (the versions it advertises); an unknown deployment reads none.
	ReadsInbox(ctx context.Context, deployment string, v int) (bool, error)
}

// Observer receives a session's measurements (the process's metrics). Nop
// is a no-op Observer.
type Observer interface {
	Committed(events []wire.Event)
	Conflict(op string)
	StepDone(d runtime.StepDone, took time.Duration)
	StepFailed(code string)
	// StepRetried counts a failed step that runs again (code: why it
	// failed), when its retry starts.
	StepRetried(code string)
	Hibernated()
	// IdleExpired counts a session this process ended with reason
	// idle_expired (Env.EndIdleAfter), once, when its end commits.
	IdleExpired()
	InboxLag(d time.Duration)
	// LiveDropped counts deltas a step's live buffer had no room for.
	LiveDropped(n int)
}

// Nop observes nothing.
type Nop struct{}

func (Nop) Committed([]wire.Event)                   {}
func (Nop) Conflict(string)                          {}
func (Nop) StepDone(runtime.StepDone, time.Duration) {}
func (Nop) StepFailed(string)                        {}
func (Nop) StepRetried(string)                       {}
func (Nop) Hibernated()                              {}
func (Nop) IdleExpired()                             {}
func (Nop) InboxLag(time.Duration)                   {}
func (Nop) LiveDropped(int)                          {}

// Agents tells a session which deployments belong to its agent
// (docs/runtime.md R10). A handoff trigger (a delivery without a parent,
// or a move) stamped with another agent's deployment is refused:
// command.rejected {reason: "agent_mismatch"}, and the session stays.
type Agents interface {
	// SameAgent reports whether deployment belongs to this process's
	// agent. It returns an error only when ctx ends first.
	SameAgent(ctx context.Context, deployment string) (bool, error)
}
