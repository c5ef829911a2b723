package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// EncodeCheckpoint stamps the current state version, checks every rule and
// returns the canonical encoding. It is on the commit path, so the Go rules
// carry every constraint of the schema (TestCheckpointEncodeAgreement holds
// them to it); the schema itself is checked on decode of any bytes this
// encoder would not have written (DecodeCheckpoint) and, with
// BATON_WIRE_SCHEMA_CHECK=1, on every encode and decode. Inline history
// or state over MaxInlineBytes, or a checkpoint over MaxCheckpointBytes, is
// ErrTooLarge: move the content to the object store and set the Ref.
//
// The state version is the lowest that expresses the content: 9 when it
// uses the busy modes (usesBusy), else 8 when it
// ended terminated or idle_expired, else 7 when the session (or a child
// it creates) has tags, else 6 when a child send is pending, else 5 when it
// uses subagents (handles, child waits, a parent, sends, a delegated
// turn), else 4 for tasks of kinds, else 3 when it uses the agent API's
// content (structured history, full payloads, usage), else 2 when
// something is out of line (stateRef, an input's textRef), else 1. The
// commands it stores are written at inbox version StoredCommandVersion.
//
// A session's successive checkpoints are cheaper to encode with a
// CheckpointEncoder, which gives the same bytes.
func EncodeCheckpoint(c Checkpoint) ([]byte, error) {
	return encodeCheckpoint(c, encodeHistory)
}

// DecodeCheckpoint reads a checkpoint. The state version is checked first,
// so an unreadable version is ErrUnsupportedState (refuse before
// activating), distinct from a corrupt value (ErrInvalid). The bytes
// EncodeCheckpoint writes are read under the Go rules alone
// (decodeCanonical); any others are checked against their version's
// schema too. Errors are *StateError.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	if len(b) > MaxCheckpointBytes {
		return Checkpoint{}, stateFail(0, ErrTooLarge, "%d bytes, limit %d", len(b), MaxCheckpointBytes)
	}
	v, err := peekStateVersion(b)
	if err != nil {
		return Checkpoint{}, err
	}
	if c, ok := decodeCanonical(b); ok {
		return c, nil
	}
	if err := debugCheck(checkpointContract(v), b); err != nil {
		return Checkpoint{}, stateFail(v, ErrInvalid, "%v", err)
	}
	return decodeRules(v, b)
}

// decodeRules is the strict decode and the Go rules of DecodeCheckpoint,
// after the schema.
func decodeRules(v int, b []byte) (Checkpoint, error) {
	var c Checkpoint
	if err := unmarshalStrict(b, &c); err != nil {
		return Checkpoint{}, stateFail(v, ErrInvalid, "%v", err)
	}
	c = normalizeCheckpoint(c)
	if err := c.validate(); err != nil {
		return Checkpoint{}, err
	}
	return c, nil
}

// decodeCanonical is DecodeCheckpoint without the schema for the bytes
// this build's encoder writes: b is accepted when it decodes under the Go
// rules to a value whose EncodeCheckpoint is b itself, byte for byte.
// Whatever EncodeCheckpoint accepts its version's schema accepts
// (TestCheckpointEncodeAgreement), so such a b passes the schema, and the
// value is the one the schema path decodes. Anything else — another
// build's spacing, member order or version, a hand-edited or damaged
// record — is declined (false) and goes through the schema. The check
// costs an encoding, about an eighth of the schema's validation of a long
// checkpoint (BenchmarkDecodeCheckpointLong).
func decodeCanonical(b []byte) (Checkpoint, bool) {
	if debugSchema {
		return Checkpoint{}, false
	}
	var c Checkpoint
	if unmarshalStrict(b, &c) != nil {
		return Checkpoint{}, false
	}
	c = normalizeCheckpoint(c)
	if c.validate() != nil {
		return Checkpoint{}, false
	}
	enc, err := EncodeCheckpoint(c)
	if err != nil || !bytes.Equal(enc, b) {
		return Checkpoint{}, false
	}
	return c, true
}

// ReadStateVersion returns the state version a checkpoint declares,
// without decoding the rest.
func ReadStateVersion(b []byte) (int, error) {
	doc, err := parseObject(b)
	if err != nil {
		return 0, stateFail(0, ErrInvalid, "%v", err)
	}
	v, _ := doc["stateV"].(json.Number)
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, stateFail(0, ErrUnsupportedState, "stateV is missing or not an integer")
	}
	return n, nil
}

// peekStateVersion reads only stateV, so an unreadable version is refused
// before the rest is interpreted.
func peekStateVersion(b []byte) (int, error) {
	var head struct {
		StateV json.RawMessage `json:"stateV"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, stateFail(0, ErrInvalid, "%v", err)
	}
	return stateVersionOf(map[string]any{"stateV": json.Number(head.StateV)})
}

func stateVersionOf(doc map[string]any) (int, error) {
	raw, _ := doc["stateV"].(json.Number)
	v, err := strconv.Atoi(string(raw))
	switch {
	case err != nil:
		return 0, stateFail(0, ErrUnsupportedState, "stateV is missing or not an integer")
	case v < MinStateVersion || v > CurrentStateVersion:
		return v, stateFail(v, ErrUnsupportedState, "this build reads state versions %d to %d", MinStateVersion, CurrentStateVersion)
	}
	return v, nil
}

// lowestVersion is the lowest state version that can express c.
func (c *Checkpoint) lowestVersion() int {
	switch {
	case c.usesBusy():
		return BusyStateVersion
	case c.usesEndReasons():
		return EndStateVersion
	case len(c.Tags) > 0 || c.sendsTags():
		return 7
	case c.usesPendingSends():
		return 6
	case c.usesChildren():
		return 5
	case c.usesTaskKinds():
		return 4
	case c.usesAgentAPI():
		return 3
	case c.usesRefs():
		return 2
	}
	return 1
}

// usesEndReasons reports an end reason state version 7 readers refuse:
// terminated (a user's end) or idle_expired (EndStateVersion).
func (c *Checkpoint) usesEndReasons() bool {
	return c.Ended == EndTerminated || c.Ended == EndIdleExpired
}

// sendsTags reports a child-creating send (or pending send) with the new
// child's tags (state version 7).
func (c *Checkpoint) sendsTags() bool {
	for _, s := range c.Sends {
		if len(s.Tags) > 0 {
			return true
		}
	}
	for _, p := range c.PendingSends {
		if len(p.Send.Tags) > 0 {
			return true
		}
	}
	return false
}

// usesAgentAPI reports content that state version 2 readers would decode
// wrongly or ignore: structured history entries (inline or in a sealed
// segment), stored payloads, usage.
func (c *Checkpoint) usesAgentAPI() bool {
	if c.HistoryV >= 3 || c.Usage != (Usage{}) || c.Turn.Usage != (Usage{}) {
		return true
	}
	for _, h := range c.History {
		if h.Structured() {
			return true
		}
	}
	for _, in := range c.Turn.Inputs {
		if in.Payloads != nil || in.PayloadsRef != nil {
			return true
		}
	}
	return false
}

// usesTaskKinds reports a task that state version 3 readers would run as a
// sleep: one of another kind, or with an input.
func (c *Checkpoint) usesTaskKinds() bool {
	for _, t := range c.Waits.Tasks {
		if t.KindOf() != TaskSleep || t.Input != nil || t.InputRef != nil {
			return true
		}
	}
	return false
}

// usesRefs reports out-of-line content that state version 1 readers would
// ignore (they would run with no state or an empty delivery).
func (c *Checkpoint) usesRefs() bool {
	if c.StateRef != nil {
		return true
	}
	for _, in := range c.Turn.Inputs {
		if in.TextRef != nil {
			return true
		}
	}
	return false
}

func stateFail(v int, sentinel error, format string, args ...any) *StateError {
	return &StateError{StateV: v, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}

// validate checks the rules a schema does not state.
func (c *Checkpoint) validate() error { return c.validateSized(-1) }

// validateSized is validate with the inline history's encoded size
// already known (histBytes; -1: encode the history to measure it).
func (c *Checkpoint) validateSized(histBytes int) error {
	if err := c.validateContent(histBytes); err != nil {
		var se *StateError
		if errors.As(err, &se) {
			return se
		}
		return stateFail(c.StateV, ErrInvalid, "%v", err)
	}
	return nil
}

func (c *Checkpoint) validateContent(histBytes int) error {
	if c.StateV < MinStateVersion || c.StateV > CurrentStateVersion {
		return stateFail(c.StateV, ErrUnsupportedState, "this build reads state versions %d to %d", MinStateVersion, CurrentStateVersion)
	}
	if c.StateV == 1 && c.usesRefs() {
		return errors.New("out-of-line state or input text needs state version 2 (version 1 readers ignore it)")
	}
	if c.StateV < 3 && c.usesAgentAPI() {
		return errors.New("structured history, payloads or usage need state version 3 (older readers decode history as {role, text})")
	}
	if c.StateV < 5 && c.usesChildren() {
		return errors.New("handles, child waits, a parent, sends or a delegated turn need state version 5")
	}
	if c.StateV < 7 && (len(c.Tags) > 0 || c.sendsTags()) {
		return errors.New("tags (of the session, or of a new child's send) need state version 7")
	}
	if c.StateV < EndStateVersion && c.usesEndReasons() {
		return fmt.Errorf("ended %q needs state version %d", c.Ended, EndStateVersion)
	}
	if c.StateV < BusyStateVersion && c.usesBusy() {
		return fmt.Errorf("%s needs state version %d", c.busyContent(), BusyStateVersion)
	}
	if err := checkTags(c.Tags); err != nil {
		return fmt.Errorf("tags: %w", err)
	}
	if !sessionRE.MatchString(c.SessionID) {
		return fmt.Errorf("sessionId %q must match %s", c.SessionID, sessionRE)
	}
	if err := c.validateInline(histBytes); err != nil {
		return err
	}
	if c.OutputSchema != nil && !isObject(c.OutputSchema) {
		return errors.New("outputSchema must be a JSON object")
	}
	if err := nonEmpty("tokens", c.Tokens...); err != nil {
		return err
	}
	if len(c.PendingAliases) > 0 {
		if err := nonEmpty("pendingAliases", c.PendingAliases...); err != nil {
			return err
		}
	}
	if c.Timeout < 0 {
		return errors.New("timeout is negative")
	}
	if c.Timer != nil {
		if err := all(nonEmpty("timer.id", c.Timer.ID), validTime("timer.deadline", c.Timer.Deadline)); err != nil {
			return err
		}
	}
	if err := c.Applied.validate(); err != nil {
		return err
	}
	if err := c.validateRuntime(); err != nil {
		return err
	}
	return c.validateOutbox()
}

// validateRuntime checks the owner's runtime fields: history roles, the
// end reason, the timer's duration, waits and the live turn's inputs.
func (c *Checkpoint) validateRuntime() error {
	for i, h := range c.History {
		if h.Role == "" {
			return fmt.Errorf("history[%d].role is empty", i)
		}
		if h.Structured() {
			if err := h.validateStructured(); err != nil {
				return fmt.Errorf("history[%d]: %w", i, err)
			}
		}
	}
	if c.HistoryV != 0 && c.HistoryV != 3 {
		return fmt.Errorf("historyV %d is not 0 or 3", c.HistoryV)
	}
	if err := all(c.Usage.Validate(), c.Turn.Usage.Validate()); err != nil {
		return err
	}
	switch c.Ended {
	case "", EndDone, EndExpired, EndFailed, EndClosed, EndTerminated, EndIdleExpired:
	default:
		return fmt.Errorf("ended %q is not done, expired, failed, closed, terminated or idle_expired", c.Ended)
	}
	if c.Timer != nil && c.Timer.Duration < 0 {
		return errors.New("timer.durationNs is negative")
	}
	if err := c.Waits.validate(); err != nil {
		return err
	}
	if err := c.validateChildren(); err != nil {
		return err
	}
	if err := c.validatePendingSends(); err != nil {
		return err
	}
	for i, in := range c.Turn.Inputs {
		if err := in.validateStored(); err != nil {
			return fmt.Errorf("turn.inputs[%d]: %w", i, err)
		}
	}
	return c.validateBusy()
}

// validateStored checks an input a checkpoint stores (an admitted input of
// the live turn, or a delivery in an open debounce window).
func (in TurnInput) validateStored() error {
	if in.ID == "" || in.Kind == "" {
		return errors.New("needs id and kind")
	}
	if in.TextRef != nil {
		if err := in.TextRef.Validate(); err != nil {
			return fmt.Errorf("textRef: %w", err)
		}
		if in.Text != "" {
			return errors.New("text is inline or referenced, not both")
		}
	}
	if err := validatePayloads(in); err != nil {
		return err
	}
	if err := in.validateRefs(); err != nil {
		return err
	}
	if in.Mode != "" && !ValidMode(in.Mode) {
		return fmt.Errorf("mode %q is not one of %v", in.Mode, Modes())
	}
	switch {
	case in.Kind == KindTag || in.Tag != nil:
		return errors.New("a tag command is applied at once, never stored in a turn")
	case in.Kind == KindTerminate:
		return errors.New("a terminate command is applied at once, never stored in a turn")
	case in.Kind == KindConfigure:
		return errors.New("a configure command is applied at once, never stored in a turn")
	}
	return nil
}

// validatePayloads: stored payloads are a delivery's, inline or referenced,
// and stand for its text (which is then not stored).
func validatePayloads(in TurnInput) error {
	if in.Payloads == nil && in.PayloadsRef == nil {
		return nil
	}
	switch {
	case in.Kind != KindDeliver:
		return errors.New("only a delivery has payloads")
	case in.Payloads != nil && in.PayloadsRef != nil:
		return errors.New("payloads are inline or referenced, not both")
	case in.Text != "" || in.TextRef != nil:
		return errors.New("a delivery with stored payloads has no text")
	case in.PayloadsRef != nil:
		return in.PayloadsRef.Validate()
	}
	for i := range in.Payloads {
		if err := in.Payloads[i].validate(); err != nil {
			return fmt.Errorf("payload %d: %w", i, err)
		}
	}
	return nil
}

func (w Waits) validate() error {
	if w.Input != nil && w.Input.RequestID == "" {
		return errors.New("waits.input.requestId is empty")
	}
	if w.Auth != nil && w.Auth.AttemptID == "" {
		return errors.New("waits.auth.attemptId is empty")
	}
	for i, t := range w.Tasks {
		if t.ID == "" || t.Duration < 0 {
			return fmt.Errorf("waits.tasks[%d] needs an id and a duration >= 0", i)
		}
		if t.Input != nil && t.InputRef != nil {
			return fmt.Errorf("waits.tasks[%d]: input is inline or referenced, not both", i)
		}
		if t.InputRef != nil {
			if err := t.InputRef.Validate(); err != nil {
				return fmt.Errorf("waits.tasks[%d].inputRef: %w", i, err)
			}
		}
	}
	return nil
}

// validateInline enforces inline-or-reference for history and state (the
// session's, and the state the live turn found, turn.before). histBytes is
// the inline history's encoded size (-1: encode it to measure it).
func (c *Checkpoint) validateInline(histBytes int) error {
	if c.State != nil && c.StateRef != nil {
		return errors.New("state is inline or referenced, not both")
	}
	if c.StateRef != nil {
		if err := c.StateRef.Validate(); err != nil {
			return err
		}
	}
	for _, ref := range c.HistorySegments {
		if err := ref.Validate(); err != nil {
			return err
		}
	}
	if n := len(c.State); n > MaxInlineBytes {
		return stateFail(c.StateV, ErrTooLarge, "inline state is %d bytes, limit %d (use StateRef)", n, MaxInlineBytes)
	}
	if b := c.Turn.Before; b != nil {
		if b.State != nil && b.StateRef != nil {
			return errors.New("turn.before: state is inline or referenced, not both")
		}
		if b.StateRef != nil {
			if err := b.StateRef.Validate(); err != nil {
				return fmt.Errorf("turn.before.stateRef: %w", err)
			}
		}
		if n := len(b.State); n > MaxInlineBytes {
			return stateFail(c.StateV, ErrTooLarge, "inline turn.before.state is %d bytes, limit %d (use StateRef)", n, MaxInlineBytes)
		}
	}
	if histBytes < 0 {
		h, _ := marshal(c.History)
		histBytes = len(h)
	}
	if histBytes > MaxInlineBytes {
		return stateFail(c.StateV, ErrTooLarge, "inline history is %d bytes, limit %d (seal it into HistorySegments)", histBytes, MaxInlineBytes)
	}
	return nil
}

// validateOutbox: every outbox event belongs to this session and the
// outbox is the contiguous run of seqs ending at EventSeq.
func (c *Checkpoint) validateOutbox() error {
	for i := range c.Outbox {
		e := &c.Outbox[i]
		if err := e.validateEnvelope(); err != nil {
			return err
		}
		want := c.EventSeq - uint64(len(c.Outbox)-1-i)
		if e.SessionID != c.SessionID || e.Seq != want || want == 0 {
			return fmt.Errorf("outbox[%d] is %s/%d, want %s/%d (contiguous, ending at eventSeq)", i, e.SessionID, e.Seq, c.SessionID, want)
		}
	}
	return nil
}

// normalizeCheckpoint: UTC times, compact raw JSON, empty collections nil,
// Applied.Low at least 1. It copies what it changes.
func normalizeCheckpoint(c Checkpoint) Checkpoint {
	c.HistorySegments = nilIfEmpty(slices.Clone(c.HistorySegments))
	c.History = nilIfEmpty(slices.Clone(c.History))
	for i := range c.History {
		c.History[i].Data = compactRaw(c.History[i].Data)
		c.History[i].Content = nilIfEmpty(slices.Clone(c.History[i].Content))
		c.History[i].ToolCalls = nilIfEmpty(slices.Clone(c.History[i].ToolCalls))
		for j := range c.History[i].ToolCalls {
			c.History[i].ToolCalls[j].Arguments = compactRaw(c.History[i].ToolCalls[j].Arguments)
		}
	}
	c.State = compactRaw(c.State)
	c.Initiator.Auth = compactRaw(c.Initiator.Auth)
	c.OutputSchema = compactRaw(c.OutputSchema)
	if len(c.Limits) == 0 {
		c.Limits = nil
	} else {
		c.Limits = maps.Clone(c.Limits)
	}
	c.Tokens = nilIfEmpty(slices.Clone(c.Tokens))
	c.PendingAliases = nilIfEmpty(slices.Clone(c.PendingAliases))
	if c.Timer != nil {
		t := Timer{ID: c.Timer.ID, Deadline: c.Timer.Deadline.UTC(), Duration: c.Timer.Duration}
		c.Timer = &t
	}
	c.Applied = Applied{Low: c.Applied.low(), Above: nilIfEmpty(slices.Clone(c.Applied.Above)), IDs: nilIfEmpty(slices.Clone(c.Applied.IDs))}
	c.Outbox = nilIfEmpty(slices.Clone(c.Outbox))
	for i := range c.Outbox {
		c.Outbox[i] = normalizeEvent(c.Outbox[i])
	}
	c.Waits.Tasks = nilIfEmpty(slices.Clone(c.Waits.Tasks))
	for i := range c.Waits.Tasks {
		t := &c.Waits.Tasks[i]
		t.Input = compactRaw(t.Input)
		if t.Kind == TaskSleep && t.Input == nil && t.InputRef == nil {
			t.Kind = "" // what versions 1 to 3 wrote (and read as sleep)
		}
	}
	c.Turn.Inputs = nilIfEmpty(slices.Clone(c.Turn.Inputs))
	for i := range c.Turn.Inputs {
		c.Turn.Inputs[i].Value = compactRaw(c.Turn.Inputs[i].Value)
		c.Turn.Inputs[i].Payloads = nilIfEmpty(slices.Clone(c.Turn.Inputs[i].Payloads))
	}
	normalizeChildren(&c)
	normalizePendingSends(&c)
	c.Tags = normalizeTags(c.Tags)
	normalizeBusy(&c)
	return c
}

// CheckpointPeek is what PeekCheckpoint reads of a checkpoint: the members
// every state version so far has kept with the same meaning.
type CheckpointPeek struct {
	StateV    int      `json:"stateV"`
	SessionID string   `json:"sessionId"`
	EventSeq  uint64   `json:"eventSeq"`
	Tokens    []string `json:"tokens"`
	Applied   Applied  `json:"applied"`
}

// PeekCheckpoint reads a checkpoint this build may not be able to decode
// (a state version it does not read, or a shape it refuses) as far as the
// stable members go, without validating it: a best effort for reporting
// on, or ending, a session no owner can run (the ingress's status of a
// quarantined session, its admin end). Never a basis for running one.
func PeekCheckpoint(b []byte) (CheckpointPeek, error) {
	var p CheckpointPeek
	if err := json.Unmarshal(b, &p); err != nil {
		return CheckpointPeek{}, stateFail(0, ErrInvalid, "%v", err)
	}
	return p, nil
}
