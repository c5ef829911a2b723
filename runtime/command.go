package runtime

import (
	"strconv"

	"github.com/baton-rt/baton/wire"
)

// Kind names an inbox command kind: the wire package owns the vocabulary.
type Kind = wire.Kind

// Command kinds (wire's).
const (
	KindDeliver       = wire.KindDeliver
	KindCancel        = wire.KindCancel
	KindReset         = wire.KindReset
	KindClear         = wire.KindClear
	KindCompact       = wire.KindCompact
	KindInputResponse = wire.KindInputResponse
	KindAuthCallback  = wire.KindAuthCallback
	KindTaskResult    = wire.KindTaskResult
	KindTimeout       = wire.KindTimeout
	KindPause         = wire.KindPause
	KindResume        = wire.KindResume
	KindMove          = wire.KindMove
	KindChildResult   = wire.KindChildResult
	KindChildWaiting  = wire.KindChildWaiting
	KindChildResumed  = wire.KindChildResumed
	KindEnd           = wire.KindEnd
	KindTag           = wire.KindTag
	KindTerminate     = wire.KindTerminate
	KindConfigure     = wire.KindConfigure
)

// Kinds lists every command kind in a fixed order.
func Kinds() []Kind { return wire.Kinds() }

// Delivery modes (wire's). An empty mode is the session's default mode
// (see Snapshot.DefaultMode), itself ModeQueue unless configured.
const (
	ModeQueue     = wire.ModeQueue
	ModeSteer     = wire.ModeSteer
	ModeReject    = wire.ModeReject
	ModeInterrupt = wire.ModeInterrupt
	ModeRollback  = wire.ModeRollback
	ModeDebounce  = wire.ModeDebounce
	ModeLatest    = wire.ModeLatest
)

// Command is one inbox command as the machine sees it: wire's TurnInput,
// the owner's decoded view of an inbox command with its stream sequence.
// The driver builds it once, when it reads the payload (wire.DecodeInput:
// an undecodable one arrives with Rejected set; one the owner refuses to
// apply, with Refused set), and the checkpoint stores a command admitted
// into the open turn as it is. Only the fields that belong to Kind are set.
type Command = wire.TurnInput

// class says where a command may be applied; see docs/runtime.md.
type class int

const (
	classFIFO      class = iota // waits for settlement, strictly in order
	classImmediate              // applies at the next boundary
)

func classOf(c *Command) class {
	switch c.Kind {
	case KindDeliver, KindClear, KindCompact:
		if !declined(c) {
			return classFIFO
		}
	}
	return classImmediate
}

// declined reports a command the machine records but never applies: one
// the driver could not decode (Rejected: wire.rejected), one the owner
// refused (Refused: command.rejected; a busy reject-mode delivery too) or
// one a newer latest-mode delivery superseded (Superseded:
// command.superseded). Whatever its kind, it is immediate, never a handoff
// trigger, never a steer and never interrupts a step.
func declined(c *Command) bool { return c.Rejected != "" || c.Refused != "" || c.Superseded != 0 }

// steers reports whether c is a steering delivery.
func steers(c *Command) bool { return c.Kind == KindDeliver && c.Mode == ModeSteer && !declined(c) }

// interrupts reports whether c must reach a running step at once: cancel,
// reset, end, terminate, a timeout of the armed timer, and an interrupt or
// rollback delivery of the live turn's caller (interrupting).
func (m *Machine) interrupts(c *Command) bool {
	switch c.Kind {
	case KindCancel, KindReset, KindEnd, KindTerminate:
		return !declined(c)
	case KindTimeout:
		return !declined(c) && m.snap.Timer != nil && c.TimerID == m.snap.Timer.ID
	case KindDeliver:
		return m.interrupting(c)
	}
	return false
}

// Ref names an applied command in a commit.
type Ref struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
}

func itoa(n int) string { return strconv.Itoa(n) }
