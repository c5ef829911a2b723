package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// The body of a handoff start request and its reply are
// protocol.HandoffStart and protocol.HandoffStartReply; this file sends one
// (Starter), and answers one from Activate's result (Reply).

// ActivateRequestFrom is a handoff start request as Activate takes it.
func ActivateRequestFrom(r protocol.HandoffStart) ActivateRequest {
	return ActivateRequest{HandoffID: r.HandoffID, SessionID: r.SessionID, ExpectedRevision: r.ExpectedRevision, Target: r.DeploymentID}
}

// Starter sends a handoff start request to the target deployment. It
// returns an error matching ErrNoResponders when nobody received it; any
// other error leaves the outcome uncertain.
type Starter interface {
	Start(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error)
}

// NATSStarter is the Starter over core NATS request/reply.
type NATSStarter struct {
	NC    *nats.Conn
	Names subjects.Names
}

// Start requests Names.Start(req.DeploymentID).
func (s NATSStarter) Start(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error) {
	if s.Names == (subjects.Names{}) {
		return protocol.HandoffStartReply{}, fmt.Errorf("%w: NATSStarter without subjects.Names", ErrInvalid)
	}
	if err := subjects.ValidateDeployment(req.DeploymentID); err != nil {
		return protocol.HandoffStartReply{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return protocol.HandoffStartReply{}, err
	}
	subj := s.Names.Start(req.DeploymentID)
	msg, err := s.NC.RequestWithContext(ctx, subj, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return protocol.HandoffStartReply{}, fmt.Errorf("%w: %s: %w", ErrNoResponders, subj, err)
	}
	if err != nil {
		return protocol.HandoffStartReply{}, fmt.Errorf("handoff: start %s: %w", subj, err)
	}
	var reply protocol.HandoffStartReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return protocol.HandoffStartReply{}, fmt.Errorf("handoff: start %s: reply: %w", subj, err)
	}
	return reply, nil
}

// Reply builds the answer to req from Activate's result (or from the
// error that decoding req returned).
func Reply(req protocol.HandoffStart, act Activation, err error) protocol.HandoffStartReply {
	r := protocol.HandoffStartReply{HandoffID: req.HandoffID, SessionID: req.SessionID, DeploymentID: req.DeploymentID}
	if err != nil {
		r.Error = protocol.Refuse(replyCode(err), err)
		return r
	}
	r.Activated, r.Replayed = true, act.Replayed
	r.DeploymentID, r.OwnerRunID, r.Epoch = act.Session.Record.DeploymentID, act.Session.Record.OwnerRunID, act.Session.Record.Epoch
	return r
}

// replyCode is the code of an activation error. Every code but
// CodeUncertain is definite: the candidate did not activate and will not
// for this request.
func replyCode(err error) protocol.Code {
	switch {
	case errors.Is(err, ErrUncertain):
		return protocol.CodeUncertain
	case errors.Is(err, ErrRefused):
		return protocol.CodeRefused
	case errors.Is(err, ErrInvalid), errors.Is(err, protocol.ErrMalformed):
		return protocol.CodeBadRequest
	}
	return protocol.CodeUnavailable
}
