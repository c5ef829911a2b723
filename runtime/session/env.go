package session

import (
	"errors"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
)

// Env is what every session of one owner process shares: its ports, its
// agent and its settings. The owner process builds one; a test builds one
// over the in-memory ports (package runtime/session/memory).
type Env struct {
	Records  Records
	Inbox    Inbox
	Blobs    Blobs
	Timers   Timers
	Backlog  Backlog
	Process  Process
	Handoffs Handoffs
	Tasks    Tasks
	Sends    Sends
	// Agents says whether a handoff trigger's deployment belongs to this
	// deployment's agent (nil: every deployment does, as before agents).
	Agents   Agents
	Observer Observer // nil: Nop
	// Live publishes steps' live output (nil: deltas are discarded).
	Live Live
	// Journal holds steps' journals (nil: StepInput.Do records nothing).
	Journal JournalStore
	// Inventory records the blobs each session owns and refers to, which
	// lets a commit delete what it no longer refers to (nil: nothing is
	// recorded, and a commit deletes only the state blob it superseded).
	Inventory Inventory
	// Index keeps the sessions' entries of the session index (nil: none
	// is written).
	Index Index
	// AgentName is the agent this deployment is a version of (the index
	// entries' agent).
	AgentName string
	// Appender returns the event appender of a session.
	Appender func(sessionID string) Appender
	Agent    runtime.Agent
	Checker  *runtime.Checker // nil: runtime.NewChecker(nil, Agent.EventKinds())
	Log      *slog.Logger     // nil: discarded
	Now      func() time.Time // the machine's clock (nil: time.Now)
	// Deployment is this process's deployment.
	Deployment string
	// TickInterval paces clock ticks and purges (0: 1 s).
	TickInterval time.Duration
	// TriggerWait bounds how long a handoff's successor waits for its
	// trigger, the first delivery of its cursor, to admit it in its boot
	// commit (runtime.Boot.First); past it the boot commits alone and the
	// trigger follows as any delivery (0: DefaultTriggerWait; negative:
	// never wait, the boot always commits alone).
	TriggerWait time.Duration
	// StepTimeout bounds one agent step (0: none).
	StepTimeout time.Duration
	// HibernateAfter is how long a quiet session stays loaded (≤ 0: until
	// asked, or drained).
	HibernateAfter time.Duration
	// EndIdleAfter ends a session that had no command for this long, with
	// reason idle_expired, while it is idle (runtime.IdleExpire); ≤ 0:
	// never.
	EndIdleAfter time.Duration
	// ChildSendTimeout bounds a pending child send, from its durable
	// start (0: DefaultChildSendTimeout).
	ChildSendTimeout time.Duration
	// Limits are this deployment's maximums (runtime.Limits; zero: none).
	Limits runtime.Limits
	// StepRetry is how a step that failed for a reason outside the agent's
	// control runs again (runtime.RetryPolicy; zero: never).
	StepRetry runtime.RetryPolicy
	// MaxDebounce bounds a debounce window (runtime.Config.MaxDebounce).
	MaxDebounce time.Duration
	// Failpoints are the armed fault injection points (tests and --fault
	// only; nil arms none).
	Failpoints *failpoint.Registry
	segments   *segmentCache
	blobs      *blobStore
}

// DefaultChildSendTimeout bounds a pending child send by default.
const DefaultChildSendTimeout = 60 * time.Second

// DefaultTriggerWait is Env.TriggerWait's default: the trigger is in the
// inbox before the handoff begins, so the new cursor's first pull returns
// it within a round trip or two; the bound only matters when something
// else comes first or nothing comes.
const DefaultTriggerWait = 100 * time.Millisecond

// Ready fills Env's defaults and checks that its ports are set; call it
// once, before the first New.
func (e *Env) Ready() error {
	if e.Records == nil || e.Inbox == nil || e.Blobs == nil || e.Timers == nil || e.Backlog == nil ||
		e.Process == nil || e.Handoffs == nil || e.Tasks == nil || e.Sends == nil || e.Appender == nil || e.Agent == nil {
		return errors.New("session: Env needs Records, Inbox, Blobs, Timers, Backlog, Process, Handoffs, Tasks, Sends, Appender and Agent")
	}
	if e.Observer == nil {
		e.Observer = Nop{}
	}
	if e.Checker == nil {
		e.Checker = runtime.NewChecker(nil, e.Agent.EventKinds())
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.TickInterval == 0 {
		e.TickInterval = time.Second
	}
	if e.TriggerWait == 0 {
		e.TriggerWait = DefaultTriggerWait
	}
	if e.ChildSendTimeout <= 0 {
		e.ChildSendTimeout = DefaultChildSendTimeout
	}
	e.segments = newSegmentCache()
	e.blobs = newBlobStore(e.Blobs, e.Inventory)
	return nil
}

// Boot is what a claim (or a new session, or a handoff activation) hands a
// session to run: the record as written, at its revision, and the
// checkpoint as read.
type Boot struct {
	Record   record.SessionRecord
	Revision uint64
	// Checkpoint is the decoded checkpoint (NewCheckpoint for a new
	// session), out-of-line content read back (ReadCheckpoint).
	Checkpoint Checkpoint
	// Tokens are the encoded address tokens this run filters on: the
	// stable token first.
	Tokens []string
	// Timeout is a new session's inactivity timeout (0: none).
	Timeout time.Duration
	// Predecessor is the previous run's cursor, deleted once this run's
	// exists ("": none).
	Predecessor string
	// Arrival is the handoff that activated this run (runtime.BootHandoff),
	// Adoption the adoption of a retired deployment's session
	// (runtime.BootAdopt).
	Arrival  *runtime.HandoffInfo
	Adoption *runtime.AdoptInfo
	// IdleSince is when the session was last active before this run (the
	// claimed record's previous write: a hibernation, a commit), for
	// EndIdleAfter; zero: now.
	IdleSince time.Time
	// Orphans asks the run to collect, before its first commit, the blobs
	// a previous run that did not stop cleanly may have left (the claimed
	// record was not hibernated): collectOrphans. A wake of a hibernated
	// session, a new session and a handoff successor skip it.
	Orphans bool
}
