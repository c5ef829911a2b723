package handoff_test

import (
	"context"
	"fmt"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/protocol"
)

// responder answers handoff start requests as an owner process does
// (runtime/pool's start subject): decode, Activate, Reply. The scenarios
// here use it as the candidate process.
type responder struct {
	Store handoff.Store
	// Candidate is this process; its RunID is replaced by NewRunID() for
	// every request.
	Candidate handoff.Candidate
	NewRunID  func() string
}

// Handle returns the reply to send and Activate's result.
func (r responder) Handle(ctx context.Context, data []byte) (protocol.HandoffStartReply, handoff.Activation, error) {
	req, err := protocol.DecodeHandoffStart(data)
	if err != nil {
		err = fmt.Errorf("%w: %w", handoff.ErrInvalid, err)
		return handoff.Reply(req, handoff.Activation{}, err), handoff.Activation{}, err
	}
	c := r.Candidate
	if r.NewRunID != nil {
		c.RunID = r.NewRunID()
	}
	act, err := handoff.Activate(ctx, r.Store, handoff.ActivateRequestFrom(req), c)
	return handoff.Reply(req, act, err), act, err
}
