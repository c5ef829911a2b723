package wire

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The checkpoint content of pending child sends (state version 6): a
// send that creates a child on a deployment with no live owner leaves the
// session loop and is retried in the background until the child is
// created, or until the child-send timeout measured from Since has passed
// (then the handle fails with child_unavailable). The checkpoint keeps it
// while it is pending, across later commits and reboots; a checkpoint
// without one is written at a lower version.

// PendingSend is a child-creating send that has not left yet: the send as
// its commit staged it and Since, the durable start of its timeout (the
// delegation's acceptance time).
type PendingSend struct {
	Send  Send      `json:"send"`
	Since time.Time `json:"since"`
}

// usesPendingSends reports content that state version 5 readers would
// drop: a pending send (they would never retry it, nor fail its handle).
func (c *Checkpoint) usesPendingSends() bool { return len(c.PendingSends) > 0 }

// validatePendingSends: each is a valid child-creating send with a start
// time, its command ID unique.
func (c *Checkpoint) validatePendingSends() error {
	if c.StateV < 6 && c.usesPendingSends() {
		return errors.New("pending sends need state version 6")
	}
	seen := make(map[string]bool, len(c.PendingSends))
	for i, p := range c.PendingSends {
		if err := p.validate(); err != nil {
			return fmt.Errorf("pendingSends[%d]: %w", i, err)
		}
		if seen[p.Send.Command.ID] {
			return fmt.Errorf("pendingSends[%d]: command %q is not unique", i, p.Send.Command.ID)
		}
		seen[p.Send.Command.ID] = true
	}
	return nil
}

func (p PendingSend) validate() error {
	if p.Send.Alias == "" {
		return errors.New("only a send that creates its child is pending")
	}
	return all(p.Send.validate(), validTime("since", p.Since))
}

// normalizePendingSends: copies, UTC times, stored commands normalized.
func normalizePendingSends(c *Checkpoint) {
	c.PendingSends = nilIfEmpty(slices.Clone(c.PendingSends))
	for i := range c.PendingSends {
		p := &c.PendingSends[i]
		p.Since = p.Since.UTC()
		p.Send.Command = normalizeStored(p.Send.Command)
		p.Send.Tags = normalizeTags(p.Send.Tags)
	}
}
