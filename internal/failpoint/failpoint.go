package failpoint

import (
	"sync"
)

// Name names a failpoint: a place in the owner's code where a test, or
// bin/owner --fault, may inject a fault.
type Name string

// The failpoints. What a non-nil error of a point's action does is the
// point's own: a drop, a refusal or a stop.
const (
	// LoseCommitReply (SessionID): drop the reply of a commit CAS that
	// landed (the write is durable, the owner is told it is uncertain).
	LoseCommitReply Name = "lose-commit-reply"
	// DropCommit (SessionID): do not send the commit CAS and report its
	// outcome uncertain (a stream without a leader that never answered).
	DropCommit Name = "drop-commit"
	// AliasHooked (SessionID, Detail: the alias): after a live session
	// created the hook of a new alias, before it recreates its consumer
	// over the alias's subject. Its error is ignored.
	AliasHooked Name = "alias-hooked"
	// AfterCommit (SessionID): right after a commit CAS succeeded, before
	// any of the commit's events is published. Its error is ignored.
	AfterCommit Name = "after-commit"
	// BeforeCollect (SessionID): after a commit landed that no longer
	// refers to some of the session's blobs, before they are deleted.
	// Its error is ignored.
	BeforeCollect Name = "before-collect"
	// AfterJournal (SessionID): right after a step's journal entry was
	// written, before StepInput.Do returns its result. Its error is ignored.
	AfterJournal Name = "after-journal"
	// BeforeCommit (SessionID): when a step's result reached its session,
	// before the commit that folds it. Its error is ignored.
	BeforeCommit Name = "before-commit"
	// AfterConsumer (SessionID, Detail: the boot reason): right before a
	// run boots the machine, after it created its inbox consumer — or,
	// for a handoff's successor that read its trigger, while the consumer
	// is being created; an error stops the run there, as a crash would.
	AfterConsumer Name = "after-consumer"
	// Hibernating (SessionID, Detail: "cas", "consumer" or "left"): at each
	// step of a hibernation. Its error is ignored.
	Hibernating Name = "hibernating"
	// AfterIndex (SessionID): when a load has written the index entry,
	// before it claims the session. Its error is ignored.
	AfterIndex Name = "after-index"
	// BeforeIndexWrite (SessionID, Detail: the state indexed): when an
	// owner is about to write a session's entry of the session index;
	// an error drops the write (the reconciler heals it).
	BeforeIndexWrite Name = "before-index-write"
	// AfterClaim (SessionID): when a load's claim CAS succeeded, before the
	// consumer is created. Its error is ignored.
	AfterClaim Name = "after-claim"
	// LoseLeaseReply: drop the reply of a lease renewal that landed (the
	// renewal is settled by reading the lease back).
	LoseLeaseReply Name = "lose-lease-reply"
	// FailLeaseRenewal: fail a lease renewal without sending it, as a
	// bucket with no leader fails it (past its fence deadline the process
	// pauses until a renewal lands).
	FailLeaseRenewal Name = "fail-lease-renewal"
	// HoldLeaseRenewal: skip a due lease renewal (and an attempt to acquire
	// the lease again after a fence), as a frozen process would: held at
	// its fence deadline, the process fences itself.
	HoldLeaseRenewal Name = "hold-lease-renewal"
	// RefuseActivation (SessionID): a handoff target's checkpoint
	// validation fails (the source keeps the session).
	RefuseActivation Name = "refuse-activation"
	// DropWake (SessionID, Detail: the wake's source): ignore a wake
	// request received from another process, as if lost in flight.
	DropWake Name = "drop-wake"
	// HandoffSourceBefore and HandoffSourceAfter (SessionID, Detail: the
	// step of handoff/plan.go): at the named steps of a handoff this
	// process runs as its source, before a step's action and right after
	// it; an error stops the transaction there, as a crash would, and
	// handoff.ErrReplyLost from After drops a write's answer.
	HandoffSourceBefore Name = "handoff-source-before"
	HandoffSourceAfter  Name = "handoff-source-after"
	// HandoffCandidateBefore and HandoffCandidateAfter: the same for the
	// activations this process serves as a handoff candidate.
	HandoffCandidateBefore Name = "handoff-candidate-before"
	HandoffCandidateAfter  Name = "handoff-candidate-after"
	// ReadStateVersion is a value: the highest checkpoint state version
	// this process reads, as a build of that version would (a handoff
	// target then refuses a newer checkpoint; the rollback tests).
	ReadStateVersion Name = "read-state-version"
)

// Args are what a point passes its action.
type Args struct {
	SessionID string
	Detail    string
}

// Action runs when its point is reached.
type Action func(Args) error

// Registry holds the actions of the points a test (or --fault) armed. A
// nil *Registry, the production value, arms nothing and costs a nil check.
// It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	actions map[Name]Action
	values  map[Name]int
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{actions: map[Name]Action{}, values: map[Name]int{}}
}

// On arms point n with action a (nil disarms it) and returns r.
func (r *Registry) On(n Name, a Action) *Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a == nil {
		delete(r.actions, n)
	} else {
		r.actions[n] = a
	}
	return r
}

// Set gives the value point n the value v and returns r.
func (r *Registry) Set(n Name, v int) *Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.values[n] = v
	return r
}

// Eval runs point n's action, if armed, and returns its error.
func (r *Registry) Eval(n Name, a Args) error {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	act := r.actions[n]
	r.mu.RUnlock()
	if act == nil {
		return nil
	}
	return act(a)
}

// Hit reports whether point n's action, if armed, injects its fault (a
// non-nil error): the form of the points that drop or refuse.
func (r *Registry) Hit(n Name, a Args) bool { return r.Eval(n, a) != nil }

// Run runs point n's action, if armed, for its effect (the points whose
// error is ignored: a window a test publishes into, a kill).
func (r *Registry) Run(n Name, a Args) { _ = r.Eval(n, a) }

// Value returns value point n's value, 0 when unset.
func (r *Registry) Value(n Name) int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.values[n]
}

// Injected is the error an action returns to inject its fault when the
// point's error has no other meaning.
var Injected = injected{}

type injected struct{}

func (injected) Error() string { return "failpoint: injected" }

// When is an action that injects its fault (Injected) when f reports true.
func When(f func(Args) bool) Action {
	return func(a Args) error {
		if f(a) {
			return Injected
		}
		return nil
	}
}

// Do is an action that runs f and injects nothing.
func Do(f func(Args)) Action {
	return func(a Args) error {
		f(a)
		return nil
	}
}

// If is an action that injects its fault when f reports true (f ignores
// the point's arguments).
func If(f func() bool) Action {
	return func(Args) error {
		if f() {
			return Injected
		}
		return nil
	}
}
