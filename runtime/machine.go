package runtime

import (
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Config is the identity a machine runs under.
type Config struct {
	SessionID  string
	RunID      string // this owner run; also the ID of timers it arms
	Deployment string // this owner's exact deployment
	// Timeout is the session-lifetime timeout armed by a new session (0 =
	// none). A handoff successor re-arms the committed original duration.
	Timeout time.Duration
	// EventKinds are the agent's registered event kinds ([Agent.EventKinds]).
	EventKinds []string
	// RecentIDs bounds the applied-ID deduplication window (default 1024).
	RecentIDs int
	// Limits are this deployment's maximums (zero members: none). The used
	// counters are in the snapshot, so a successor with other maximums
	// applies its own to what was used before.
	Limits Limits
	// MaxAppliedAbove bounds the applied sequences the record keeps above
	// the lowest unapplied one before they are deleted from the inbox and
	// forgotten ([Forget]; default wire.MaxAppliedAbove).
	MaxAppliedAbove int
	// Retry is how a step that failed for a reason outside the agent's
	// control runs again (the zero policy: never).
	Retry RetryPolicy
	// MaxDebounce bounds a debounce window from its first delivery
	// (default DefaultMaxDebounce).
	MaxDebounce time.Duration
}

// Limits bound a turn's steps and the tokens (input + output) a turn and a
// session use. A token limit is checked after the step that reaches it; a
// session already at its token limit ends each new turn before its first
// step. Hitting one records limit.reached and ends the turn (turn.completed
// with stopReason "limit").
type Limits struct {
	MaxStepsPerTurn     int
	MaxTokensPerTurn    int64
	MaxTokensPerSession int64
}

// Machine is the pure session state machine. It is not safe for concurrent
// use: one driver goroutine owns it. See the package documentation for the
// canonical loop.
type Machine struct {
	cfg   Config
	kinds map[string]bool
	snap  Snapshot // working state; equals the last commit between boundaries

	queue   []Command         // received, unprocessed, in sequence order
	skips   map[uint64]string // handoff.skipped reasons by sequence
	maxSeen uint64
	now     time.Time

	booted, stopped bool
	step            *RunStep        // the running step
	cancelled       bool            // CancelStep sent for the running step
	result          *StepDone       // a finished step waiting for the boundary
	commit          *Commit         // the commit in flight
	after           []Effect        // effects due once the commit lands
	handoff         *Command        // the pending handoff trigger
	st              stage           // what the current boundary changes
	bud             budget          // what the current boundary's admissions add
	forgetting      map[uint64]bool // applied sequences a Forget asked to delete
	forgotten       []uint64        // deleted from the inbox: dropped at the next flush
	retry           *retrying       // the step that runs again, and its attempt
}

// broken is the seam runtime's own tests break the machine through, to
// prove the property tests catch a broken rule (export_test.go). Outside
// those tests both are nil, and the machine checks a nil func.
var broken struct {
	admitNewest func(*Machine) bool // admit the newest FIFO command
	noBudget    func(*Machine) bool // admit without a budget
}

func isBroken(f func(*Machine) bool, m *Machine) bool { return f != nil && f(m) }

// stage collects one boundary's changes; flush turns them into a Commit.
type stage struct {
	events  []Event
	sends   []Send
	applied []Ref
	after   []Effect
	dirty   bool
}

func (s *stage) changed() bool {
	return s.dirty || len(s.events) > 0 || len(s.applied) > 0 || len(s.sends) > 0
}

// NewMachine returns a machine that resumes from snap (the zero Snapshot for
// a new session). Boot must be its first input.
func NewMachine(cfg Config, snap Snapshot) (*Machine, error) {
	if cfg.SessionID == "" || cfg.RunID == "" || cfg.Deployment == "" {
		return nil, fmt.Errorf("%w: session, run and deployment IDs are required", ErrConfig)
	}
	if cfg.RecentIDs <= 0 {
		cfg.RecentIDs = 1024
	}
	if cfg.MaxAppliedAbove <= 0 {
		cfg.MaxAppliedAbove = wire.MaxAppliedAbove
	}
	m := &Machine{cfg: cfg, snap: snap.Clone(), skips: map[uint64]string{}, forgetting: map[uint64]bool{}}
	m.kinds = map[string]bool{EventMessageOutput: true}
	for _, k := range cfg.EventKinds {
		if !Reserved(k) {
			m.kinds[k] = true
		}
	}
	return m, nil
}

// Handle feeds one input and returns the effects to perform, in order.
func (m *Machine) Handle(in Input) ([]Effect, error) {
	if m.stopped {
		return nil, ErrStopped
	}
	if _, ok := in.(Boot); !ok && !m.booted {
		return nil, ErrNotBooted
	}
	switch in := in.(type) {
	case Boot:
		return m.boot(in)
	case Received:
		if !in.Now.IsZero() {
			m.now = in.Now
		}
		return m.receive(in.Cmd)
	case StepDone:
		return m.stepDone(in)
	case CommitDone:
		return m.commitDone(in)
	case HandoffDone:
		return m.handoffDone(in)
	case Tick:
		m.now = in.Now
		return nil, nil
	case IdleExpire:
		return m.idleExpire(), nil
	case SendsDone:
		if m.busy() || len(m.snap.Sends) == 0 {
			return nil, nil
		}
		m.st.dirty = true
		return m.advance(), nil
	case SendsPending:
		return m.sendsPending(in.Sends), nil
	case SendsLeft:
		return m.sendsLeft(in.IDs), nil
	case Forgotten:
		return m.forgot(in), nil
	}
	return nil, fmt.Errorf("%w: %T", ErrUnknownInput, in)
}

// Snapshot returns a copy of the working state. Between Handle calls with no
// commit in flight it equals the last committed snapshot. The copy shares
// the history with the machine (see Clone): read it, append to it or
// replace it, but never write an entry in place.
func (m *Machine) Snapshot() Snapshot { return m.snap.Clone() }

// Queued returns a copy of the received, unprocessed commands.
func (m *Machine) Queued() []Command { return slices.Clone(m.queue) }

// Stopped reports whether the machine stopped (ownership lost or moved).
func (m *Machine) Stopped() bool { return m.stopped }

// Ended returns the end reason, "" while the session lives.
func (m *Machine) Ended() string { return m.snap.Ended }

// Running returns the running step, if any.
func (m *Machine) Running() (RunStep, bool) {
	if m.step == nil {
		return RunStep{}, false
	}
	return *m.step, true
}

func (m *Machine) stop() {
	m.stopped = true
	m.step, m.commit, m.handoff, m.after = nil, nil, nil, nil
}

func (m *Machine) busy() bool {
	return m.stopped || m.step != nil || m.commit != nil || m.handoff != nil
}
