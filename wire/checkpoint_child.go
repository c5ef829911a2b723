package wire

import (
	"errors"
	"fmt"
	"slices"

	genschema "github.com/invopop/jsonschema"
)

// The checkpoint content of subagents (state version 5): a parent's
// handles and its descendants' waits, a child's parent reference, the
// commands a commit sends to other sessions and a delegated turn's
// outputs; on the admitted inputs, a parent's reference and a child's
// body.

// usesChildren reports content that state version 4 readers would ignore
// or refuse: anything of subagents.
func (c *Checkpoint) usesChildren() bool {
	if len(c.Handles) > 0 || len(c.ChildWaits) > 0 || c.Parent != nil || len(c.Sends) > 0 ||
		c.Turn.Delegated || len(c.Turn.Outputs) > 0 || c.Ended == EndClosed {
		return true
	}
	for _, in := range c.Turn.Inputs {
		if in.Parent != nil || in.Child != nil {
			return true
		}
	}
	return false
}

// validateChildren checks handles, child waits, the parent and sends.
func (c *Checkpoint) validateChildren() error {
	if err := validateHandles(c.Handles); err != nil {
		return err
	}
	for i, w := range c.ChildWaits {
		if err := w.validate(); err != nil {
			return fmt.Errorf("childWaits[%d]: %w", i, err)
		}
	}
	if c.Parent != nil {
		if err := c.Parent.validate(); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	for i, s := range c.Sends {
		if err := s.validate(); err != nil {
			return fmt.Errorf("sends[%d]: %w", i, err)
		}
	}
	return nil
}

// validateHandles: each handle valid, names unique.
func validateHandles(hs []HandleState) error {
	seen := make(map[string]bool, len(hs))
	for i, h := range hs {
		if err := h.validate(); err != nil {
			return fmt.Errorf("handles[%d]: %w", i, err)
		}
		if seen[h.Handle] {
			return fmt.Errorf("handles[%d]: handle %q is not unique", i, h.Handle)
		}
		seen[h.Handle] = true
	}
	return nil
}

func (h HandleState) validate() error {
	if h.Generation < 1 {
		return errors.New("generation must be at least 1")
	}
	if h.State == HandleActive && h.CommandID == "" {
		return errors.New("an active handle needs its delegated command's commandId")
	}
	if h.ChildSessionID != "" {
		if err := idOf("childSessionId", h.ChildSessionID, 128); err != nil {
			return err
		}
	}
	return all(idOf("handle", h.Handle, 64), validDeployment(h.DeploymentID),
		oneOf("state", h.State, HandleActive, HandleParked, HandleAvailable, HandleClosed))
}

func (w ChildWait) validate() error {
	if (w.RequestID == "") == (w.AttemptID == "") {
		return errors.New("exactly one of requestId and attemptId")
	}
	return all(nonEmpty("handle", w.Handle), nonEmpty("childSessionId", w.ChildSessionID))
}

func (p *ParentRef) validate() error {
	if p.Depth < 1 || p.Depth > MaxDepth {
		return fmt.Errorf("depth %d is not in 1..%d", p.Depth, MaxDepth)
	}
	return all(nonEmpty("sessionId", p.SessionID), nonEmpty("handle", p.Handle))
}

func (s Send) validate() error {
	if s.Command.Kind == KindTag || s.Command.Tag != nil {
		return errors.New("a tag command is applied at once, never sent or stored")
	}
	if s.Command.Kind == KindTerminate || s.Command.Terminate != nil {
		return errors.New("a terminate command is a user's, applied at once, never sent or stored")
	}
	if s.Command.Kind == KindConfigure || s.Command.Configure != nil {
		return errors.New("a configure command is a user's, applied at once, never sent or stored")
	}
	if err := s.Command.storable(); err != nil {
		return fmt.Errorf("command: %w", err)
	}
	if !sessionRE.MatchString(s.SessionID) {
		return fmt.Errorf("sessionId %q must match %s", s.SessionID, sessionRE)
	}
	if s.Alias != "" || s.DeploymentID != "" {
		if s.Alias == "" || len(s.Alias) > 512 {
			return errors.New("a send that creates its receiver needs an alias of 1 to 512 bytes")
		}
		if err := validDeployment(s.DeploymentID); err != nil {
			return err
		}
	}
	if len(s.Tags) > 0 && s.Alias == "" {
		return errors.New("tags are a new child's: a send with tags needs an alias")
	}
	if err := checkTags(s.Tags); err != nil {
		return fmt.Errorf("tags: %w", err)
	}
	if err := s.Command.validate(); err != nil {
		return fmt.Errorf("command: %w", err)
	}
	return nil
}

// validateRefs checks an admitted input's parent reference and child body.
func (in TurnInput) validateRefs() error {
	if in.Parent != nil {
		if err := in.Parent.validate(); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	if in.Child != nil {
		if err := all(nonEmpty("child.handle", in.Child.Handle), nonEmpty("child.sessionId", in.Child.SessionID), in.Child.Usage.Validate()); err != nil {
			return err
		}
	}
	return nil
}

// normalizeChildren gives the content of subagents its one in-memory form
// (copies, empty collections nil, stored commands normalized and stamped
// with the current inbox version, as Decode returns commands).
func normalizeChildren(c *Checkpoint) {
	c.Handles = nilIfEmpty(slices.Clone(c.Handles))
	c.ChildWaits = nilIfEmpty(slices.Clone(c.ChildWaits))
	if c.Parent != nil {
		p := *c.Parent
		c.Parent = &p
	}
	c.Sends = nilIfEmpty(slices.Clone(c.Sends))
	for i := range c.Sends {
		c.Sends[i].Command = normalizeStored(c.Sends[i].Command)
		c.Sends[i].Tags = normalizeTags(c.Sends[i].Tags)
	}
	c.Turn.Outputs = nilIfEmpty(slices.Clone(c.Turn.Outputs))
	for i := range c.Turn.Inputs {
		in := &c.Turn.Inputs[i]
		if in.Parent != nil {
			p := *in.Parent
			in.Parent = &p
		}
		if in.Child != nil {
			ch := *in.Child
			ch.Outputs = nilIfEmpty(slices.Clone(ch.Outputs))
			in.Child = &ch
		}
	}
}

// normalizeStored is normalizeCommand for a command a checkpoint holds,
// stamped with the current inbox version: in memory a stored command is a
// current one, whatever version it is written at (StoredCommandVersion).
func normalizeStored(cmd Command) Command {
	cmd = normalizeCommand(cmd)
	cmd.V = CurrentVersion
	return cmd
}

// StoredCommandVersion is the inbox version a checkpoint writes its stored
// commands at (sends[].command, pendingSends[].send.command), and the
// only one its schema accepts for them: the lowest version that expresses
// every command a checkpoint can store. A tag command (inbox version 3),
// a terminate command (inbox version 4) and a configure command (inbox
// version 5) are applied at once and never sent or stored, and a stored
// delivery is of mode queue or steer (storable), so every stored command
// is expressed at version 2, and a
// session that sends commands keeps a checkpoint an owner of inbox version
// 2 reads (VERSIONING.md, "Commands stored in a checkpoint"). In memory,
// after DecodeCheckpoint, they carry CurrentVersion, as Decode's commands
// do.
const StoredCommandVersion = 2

// storable refuses a command the inbox version a checkpoint stores
// commands at (StoredCommandVersion) cannot express: a delivery of a busy
// mode, with debounceMs, or without a mode (which inbox version 2
// requires; "" is the receiver's default, which a stored command does not
// presume).
func (c *Command) storable() error {
	if err := c.expressibleInV2(); err != nil {
		return fmt.Errorf("a stored command is written at inbox version %d: %s", StoredCommandVersion, err.Reason)
	}
	if c.Deliver != nil && c.Deliver.Mode == "" {
		return fmt.Errorf("a stored delivery names its mode (it is written at inbox version %d)", StoredCommandVersion)
	}
	return nil
}

// stampStored stamps the commands c stores with inbox version v, as they
// are written. c's sends are its own (normalizeCheckpoint copied them).
func (c *Checkpoint) stampStored(v int) {
	for i := range c.Sends {
		c.Sends[i].Command.V = v
	}
	for i := range c.PendingSends {
		c.PendingSends[i].Send.Command.V = v
	}
}

// JSONSchemaExtend states a send's tags as a checkpoint's (tagsSchema):
// present only when not empty.
func (Send) JSONSchemaExtend(s *genschema.Schema) { tagsSchema(prop(s, "tags")) }
