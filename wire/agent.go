package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	genschema "github.com/invopop/jsonschema"
)

// The step protocol of remote agents: the JSON shapes an owner running no
// agent code (owner.RemoteAgent, bin/owner --agent nats) exchanges with
// the workers of its deployment over core NATS. docs/agent.md ("Writing an
// agent in another language") has the subjects and the lifecycle of one
// step; the schemas are generated from these types and frozen in
// testdata/agent (one file per shape and version), like the inbox schema:
// a frozen shape never changes, a change is a new protocol version.
//
// A member whose value is null is the same as an absent one.
//
// Every message carries "v", the protocol version. An owner sends requests
// of AgentProtocolVersion and reads replies of exactly the version of the
// request it sent: a reply of any other version is refused whole (the step
// fails with result_invalid), never read field by field. A reply has no
// code member: the codes of failed steps are the runtime's, so a worker's
// failure always reads as the agent's own.

// AgentProtocolVersion is the step protocol's version.
const AgentProtocolVersion = 1

// AgentStepRequest is what an owner sends on baton.agent.<deployment>.step
// for one step: the step's input (runtime.StepInput's members) and the
// subjects of the step's traffic. History, Inputs and State are inline
// unless the request would pass the owner's inline bound or the server's
// max_payload; then the matching *Ref says how much there is and the worker
// pages it from Subjects.History (AgentHistoryRequest).
type AgentStepRequest struct {
	V            int    `json:"v" jsonschema:"enum=1"`
	Token        string `json:"token" jsonschema:"minLength=1,maxLength=64,pattern=^[A-Za-z0-9_-]+$"`
	DeploymentID string `json:"deploymentId" jsonschema:"minLength=1"`
	SessionID    string `json:"sessionId" jsonschema:"minLength=1"`
	TurnID       string `json:"turnId" jsonschema:"minLength=1"`
	Step         int    `json:"step" jsonschema:"minimum=1"`
	Caller       string `json:"caller,omitempty"`

	State      json.RawMessage `json:"state,omitempty"`
	StateRef   *AgentPartRef   `json:"stateRef,omitempty"`
	History    []HistoryEntry  `json:"history,omitempty"`
	HistoryRef *AgentPartRef   `json:"historyRef,omitempty"`
	Inputs     []TurnInput     `json:"inputs,omitempty"`
	InputsRef  *AgentPartRef   `json:"inputsRef,omitempty"`

	// HeartbeatMs is how often the worker must publish a heartbeat (or any
	// other message of the step) while it runs the step; the owner fails a
	// step it heard nothing of for its heartbeat timeout (agent_timeout).
	HeartbeatMs int64 `json:"heartbeatMs" jsonschema:"minimum=1"`
	// Deadline is when the step times out (step_timeout): work past it is
	// thrown away.
	Deadline time.Time         `json:"deadline"`
	Subjects AgentStepSubjects `json:"subjects"`
}

// AgentStepSubjects are the subjects of one step's traffic.
type AgentStepSubjects struct {
	Delta     string `json:"delta" jsonschema:"minLength=1"`     // publish AgentDelta
	Heartbeat string `json:"heartbeat" jsonschema:"minLength=1"` // publish AgentHeartbeat
	Journal   string `json:"journal" jsonschema:"minLength=1"`   // request AgentJournalRequest
	Cancel    string `json:"cancel" jsonschema:"minLength=1"`    // subscribe: AgentCancel
	History   string `json:"history" jsonschema:"minLength=1"`   // request AgentHistoryRequest
}

// AgentPartRef stands for a part of the request sent by reference: Count
// items (history entries, inputs; 1 for the state) of Bytes bytes of JSON.
type AgentPartRef struct {
	Count int `json:"count" jsonschema:"minimum=0"`
	Bytes int `json:"bytes" jsonschema:"minimum=0"`
}

// AgentStepReply is the worker's answer to a step request, sent to the
// request's reply subject (once): runtime.StepResult's members with the
// protocol version. It is checked like an in-process agent's result.
type AgentStepReply struct {
	V         int             `json:"v" jsonschema:"enum=1"`
	Outcome   string          `json:"outcome,omitempty" jsonschema:"enum=continue,enum=done,enum=input,enum=authorize,enum=task,enum=finish"`
	Events    []AgentEvent    `json:"events,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Aliases   []string        `json:"aliases,omitempty"`
	History   []HistoryEntry  `json:"history,omitempty"`
	Usage     *Usage          `json:"usage,omitempty"`
	Question  string          `json:"question,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
	AttemptID string          `json:"attemptId,omitempty"`
	Task      *AgentTask      `json:"task,omitempty"`
	Error     string          `json:"error,omitempty"`
	Fatal     bool            `json:"fatal,omitempty"`
}

// AgentEvent is one event of a step reply: message.output or a kind the
// deployment registered, with its data.
type AgentEvent struct {
	Kind string          `json:"kind" jsonschema:"minLength=1"`
	Data json.RawMessage `json:"data,omitempty"`
}

// AgentTask is the background task of a reply with outcome "task".
type AgentTask struct {
	ID         string          `json:"id,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	DurationMs int64           `json:"durationMs,omitempty" jsonschema:"minimum=0"`
	Input      json.RawMessage `json:"input,omitempty"`
}

// Parts of a step request a worker may page (AgentHistoryRequest.Part).
const (
	AgentPartHistory = "history"
	AgentPartInputs  = "inputs"
	AgentPartState   = "state"
)

// AgentHistoryRequest asks for one page of a part of a running step's
// request sent by reference, from item Offset on. Part defaults to
// "history".
type AgentHistoryRequest struct {
	V      int    `json:"v" jsonschema:"enum=1"`
	Token  string `json:"token" jsonschema:"minLength=1"`
	Part   string `json:"part,omitempty" jsonschema:"enum=history,enum=inputs,enum=state"`
	Offset int    `json:"offset,omitempty" jsonschema:"minimum=0"`
}

// AgentHistoryPage is one page: the items from Offset on (history
// entries, inputs, or the state as its one item), Total items in all, and
// Next, the offset of the next page (absent on the last). Error is set
// instead when the request cannot be served.
type AgentHistoryPage struct {
	V      int               `json:"v" jsonschema:"enum=1"`
	Part   string            `json:"part,omitempty"`
	Offset int               `json:"offset"`
	Total  int               `json:"total"`
	Items  []json.RawMessage `json:"items,omitempty"`
	Next   *int              `json:"next,omitempty"`
	Error  *AgentError       `json:"error,omitempty"`
}

// Journal operations (AgentJournalRequest.Op).
const (
	AgentJournalBegin  = "begin"
	AgentJournalRecord = "record"
)

// AgentJournalRequest is one journal operation of a step (runtime.Do over
// NATS). "begin" asks for the step's next call named Name: the reply says
// whether its result is recorded (then the worker uses it and does not make
// the call) or gives the call's position and idempotency key. "record"
// records the result (a JSON value) or the error message of the call at
// Position; its reply comes once the record is durable. Calls are
// sequential: one begun call at a time.
type AgentJournalRequest struct {
	V        int             `json:"v" jsonschema:"enum=1"`
	Op       string          `json:"op" jsonschema:"enum=begin,enum=record"`
	Name     string          `json:"name,omitempty"`
	Position int             `json:"position,omitempty" jsonschema:"minimum=0"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// AgentJournalReply answers a journal operation. For "begin": Position and
// Key always; Recorded with Result (or the recorded call's Error message)
// when the call's result is in the journal. For "record": Recorded true
// once it is durable. Failure is set instead when the operation is refused
// (nondeterministic_step, journal_unavailable, journal_busy, …): the step
// should fail.
type AgentJournalReply struct {
	V        int             `json:"v" jsonschema:"enum=1"`
	Position int             `json:"position,omitempty"`
	Key      string          `json:"key,omitempty"`
	Recorded bool            `json:"recorded,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Failure  *AgentError     `json:"failure,omitempty"`
}

// AgentDelta is one live output delta of a step.
type AgentDelta struct {
	V    int    `json:"v" jsonschema:"enum=1"`
	Text string `json:"text"`
}

// AgentHeartbeat tells the owner the worker still runs the step. Its body
// may be empty; Note, when set, is logged at debug level.
type AgentHeartbeat struct {
	V    int    `json:"v,omitempty" jsonschema:"enum=1"`
	Note string `json:"note,omitempty"`
}

// AgentCancel tells the worker to stop the step: its result will not be
// used. Reason is "cancelled" (a cancel or reset command, the owner
// stopping), "timeout" (past the deadline) or "agent_timeout" (the owner
// heard nothing of the worker).
type AgentCancel struct {
	V      int    `json:"v" jsonschema:"enum=1"`
	Token  string `json:"token"`
	Reason string `json:"reason"`
}

// AgentError is a refused operation: a machine-readable code and a
// readable message.
type AgentError struct {
	Code    string `json:"code" jsonschema:"minLength=1"`
	Message string `json:"message,omitempty"`
}

// agentShapes are the protocol's shapes by name, the names of their frozen
// schema files (testdata/agent/<name>.v<version>.json).
var agentShapes = map[string]any{
	"step_request":    AgentStepRequest{},
	"step_reply":      AgentStepReply{},
	"history_request": AgentHistoryRequest{},
	"history_page":    AgentHistoryPage{},
	"journal_request": AgentJournalRequest{},
	"journal_reply":   AgentJournalReply{},
	"delta":           AgentDelta{},
	"heartbeat":       AgentHeartbeat{},
	"cancel":          AgentCancel{},
}

var agentContracts = sync.OnceValue(func() map[string]*contract {
	out := make(map[string]*contract, len(agentShapes))
	for name, v := range agentShapes {
		var adjust func(*genschema.Schema)
		if name == "step_request" {
			adjust = agentInputsV1
		}
		c, err := newContractWith("agent/"+name+".v"+strconv.Itoa(AgentProtocolVersion)+".json", v, adjust)
		if err != nil {
			panic(err)
		}
		out[name] = c
	}
	return out
})

// agentInputsV1 keeps a step request's inputs in protocol version 1's
// shape: TurnInput's parent and child (inbox version 2, subagents) and tag
// (inbox version 3, never a step's input) are not members of it, so an
// owner leaves them out (AgentInputs) and a worker of version 1 reads
// every request it gets. The definitions only they use (ParentRef,
// ChildRef, Tag and, in a step request, Usage) go with them.
func agentInputsV1(s *genschema.Schema) {
	in := s.Definitions["TurnInput"]
	if in == nil {
		return
	}
	in.Properties.Delete("parent")
	in.Properties.Delete("child")
	in.Properties.Delete("tag")
	for _, d := range []string{"ParentRef", "ChildRef", "Tag", "Usage"} {
		delete(s.Definitions, d)
	}
}

// AgentInputs are inputs as a step request of protocol version 1 carries
// them: without Parent, Child and Tag (see agentInputsV1). It copies only
// when it changes something.
func AgentInputs(ins []TurnInput) []TurnInput {
	var out []TurnInput
	for i, in := range ins {
		if in.Parent == nil && in.Child == nil && in.Tag == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(ins)
		}
		out[i].Parent, out[i].Child, out[i].Tag = nil, nil, nil
	}
	if out == nil {
		return ins
	}
	return out
}

// AgentSchemaNames lists the protocol's shapes in a fixed order.
func AgentSchemaNames() []string {
	return []string{"step_request", "step_reply", "history_request", "history_page",
		"journal_request", "journal_reply", "delta", "heartbeat", "cancel"}
}

// AgentSchema is the JSON Schema of the protocol shape name at the current
// version (nil for an unknown name).
func AgentSchema(name string) []byte {
	c := agentContracts()[name]
	if c == nil {
		return nil
	}
	return append([]byte(nil), c.raw...)
}

// ErrAgentProtocol is the error of a protocol message that is not valid:
// not JSON, another protocol version, or not its schema.
var ErrAgentProtocol = errors.New("invalid step protocol message")

// DecodeAgent decodes b, a protocol message of the shape name, into v:
// it must be of version AgentProtocolVersion and valid against the shape's
// schema (unknown members are refused). An error matches ErrAgentProtocol.
func DecodeAgent(name string, b []byte, v any) error {
	c := agentContracts()[name]
	if c == nil {
		return fmt.Errorf("%w: no shape %q", ErrAgentProtocol, name)
	}
	obj, err := parseObject(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrAgentProtocol, name, err)
	}
	if err := agentVersion(name, obj); err != nil {
		return err
	}
	if dropNulls(obj) {
		if b, err = json.Marshal(obj); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrAgentProtocol, name, err)
		}
	}
	if err := c.check(obj); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrAgentProtocol, name, err)
	}
	if err := unmarshalStrict(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrAgentProtocol, name, err)
	}
	return nil
}

// dropNulls removes the members whose value is null from obj and the
// objects it holds (not from arrays): in the step protocol a null member is
// an absent one, as many JSON libraries write them. It reports whether it
// removed any.
func dropNulls(obj map[string]any) bool {
	dropped := false
	for k, v := range obj {
		switch v := v.(type) {
		case nil:
			delete(obj, k)
			dropped = true
		case map[string]any:
			dropped = dropNulls(v) || dropped
		case []any:
			for _, it := range v {
				if o, ok := it.(map[string]any); ok {
					dropped = dropNulls(o) || dropped
				}
			}
		}
	}
	return dropped
}

// agentVersion refuses a message of another protocol version before its
// members are looked at. A heartbeat may leave v out.
func agentVersion(name string, obj map[string]any) error {
	raw, ok := obj["v"]
	if !ok {
		if name == "heartbeat" {
			return nil
		}
		return fmt.Errorf("%w: %s: no protocol version \"v\" (this owner speaks version %d)", ErrAgentProtocol, name, AgentProtocolVersion)
	}
	n, ok := raw.(json.Number)
	if !ok || n.String() != strconv.Itoa(AgentProtocolVersion) {
		return fmt.Errorf("%w: %s: protocol version %v, this owner speaks version %d only", ErrAgentProtocol, name, raw, AgentProtocolVersion)
	}
	return nil
}

// EncodeAgent is the canonical encoding of a protocol message.
func EncodeAgent(v any) ([]byte, error) { return marshal(v) }
