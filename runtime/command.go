package runtime

import (
	"encoding/json"
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
)

// Kinds lists every command kind in a fixed order.
func Kinds() []Kind { return wire.Kinds() }

// Mode is the mode of a delivery.
type Mode string

// Delivery modes. An empty mode means ModeQueue.
const (
	ModeQueue Mode = "queue"
	ModeSteer Mode = "steer"
)

// Command is one inbox command as the machine sees it: the driver translates
// the decoded wire command into this shape. Only the fields that belong to
// Kind are set.
type Command struct {
	Seq        uint64 `json:"seq"` // inbox stream sequence
	ID         string `json:"id"`
	Kind       Kind   `json:"kind"`
	Mode       Mode   `json:"mode,omitempty"`
	Caller     string `json:"caller,omitempty"`
	Deployment string `json:"deployment,omitempty"` // acceptedDeploymentId
	Text       string `json:"text,omitempty"`

	RequestID  string          `json:"requestId,omitempty"`  // input.response
	Value      json.RawMessage `json:"value,omitempty"`      // input.response, task.result
	AttemptID  string          `json:"attemptId,omitempty"`  // auth.callback
	AuthResult string          `json:"authResult,omitempty"` // auth.callback: granted|denied
	TaskID     string          `json:"taskId,omitempty"`     // task.result
	TaskError  string          `json:"taskError,omitempty"`  // task.result
	TimerID    string          `json:"timerId,omitempty"`    // timeout
	Target     string          `json:"target,omitempty"`     // move: deployment ID
	Force      bool            `json:"force,omitempty"`      // move: cancel waits that keep it (operator, retired source)

	// Rejected is set by the driver when the wire payload could not be
	// decoded (for example a newer wire version). The machine records a
	// wire.rejected event for it and never applies it.
	Rejected string `json:"rejected,omitempty"`
}

// class says where a command may be applied; see docs/runtime.md.
type class int

const (
	classFIFO      class = iota // waits for settlement, strictly in order
	classImmediate              // applies at the next boundary
)

func (c *Command) class() class {
	switch c.Kind {
	case KindDeliver, KindClear, KindCompact:
		if c.Rejected == "" {
			return classFIFO
		}
	}
	return classImmediate
}

// steer reports whether c is a steering delivery.
func (c *Command) steer() bool { return c.Kind == KindDeliver && c.Mode == ModeSteer }

// interrupts reports whether c must reach a running step at once.
func (c *Command) interrupts(timer *Timer) bool {
	switch c.Kind {
	case KindCancel, KindReset:
		return c.Rejected == ""
	case KindTimeout:
		return c.Rejected == "" && timer != nil && c.TimerID == timer.ID
	}
	return false
}

// Ref names an applied command in a commit.
type Ref struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
}

func itoa(n int) string { return strconv.Itoa(n) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
