package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// StartRequest is the body of a handoff start request on
// baton.deploy.<deploymentId>.start. It shares the subject (and the
// deployment's queue group) with new-session starts; a non-empty handoffId
// tells them apart (IsStart).
type StartRequest struct {
	DeploymentID     string `json:"deploymentId"`
	HandoffID        string `json:"handoffId"`
	SessionID        string `json:"sessionId"`
	ExpectedRevision uint64 `json:"expectedRevision"`
}

// Activate is the request as Activate takes it.
func (r StartRequest) Activate() ActivateRequest {
	return ActivateRequest{HandoffID: r.HandoffID, SessionID: r.SessionID, ExpectedRevision: r.ExpectedRevision, Target: r.DeploymentID}
}

// StartReply answers a StartRequest. Activated is true only after the
// candidate's claim CAS landed (or, with Replayed, had landed for an
// earlier request with the same handoff ID).
type StartReply struct {
	Activated    bool        `json:"activated"`
	Replayed     bool        `json:"replayed,omitempty"`
	HandoffID    string      `json:"handoffId,omitempty"`
	SessionID    string      `json:"sessionId,omitempty"`
	DeploymentID string      `json:"deploymentId,omitempty"`
	OwnerRunID   string      `json:"ownerRunId,omitempty"`
	Epoch        uint64      `json:"epoch,omitempty"`
	Error        *ReplyError `json:"error,omitempty"`
}

// ReplyError is a machine-readable refusal.
type ReplyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Reply error codes. Every code but CodeUncertain is definite: the
// candidate did not activate and will not for this request.
const (
	CodeRefused     = "refused"     // ErrRefused: not staged, stale, wrong target, unreadable checkpoint
	CodeBadRequest  = "bad_request" // undecodable request
	CodeUnavailable = "unavailable" // the store failed before the claim
	CodeUncertain   = "uncertain"   // ErrUncertain: the claim may have landed
)

// Starter sends a handoff start request to the target deployment. It
// returns an error matching ErrNoResponders when nobody received it; any
// other error leaves the outcome uncertain.
type Starter interface {
	Start(ctx context.Context, req StartRequest) (StartReply, error)
}

// NATSStarter is the Starter over core NATS request/reply.
type NATSStarter struct {
	NC    *nats.Conn
	Names subjects.Names
}

// Start requests Names.Start(req.DeploymentID).
func (s NATSStarter) Start(ctx context.Context, req StartRequest) (StartReply, error) {
	if s.Names == (subjects.Names{}) {
		return StartReply{}, fmt.Errorf("%w: NATSStarter without subjects.Names", ErrInvalid)
	}
	if err := subjects.ValidateDeployment(req.DeploymentID); err != nil {
		return StartReply{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return StartReply{}, err
	}
	subj := s.Names.Start(req.DeploymentID)
	msg, err := s.NC.RequestWithContext(ctx, subj, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return StartReply{}, fmt.Errorf("%w: %s: %w", ErrNoResponders, subj, err)
	}
	if err != nil {
		return StartReply{}, fmt.Errorf("handoff: start %s: %w", subj, err)
	}
	var reply StartReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return StartReply{}, fmt.Errorf("handoff: start %s: reply: %w", subj, err)
	}
	return reply, nil
}

// IsStart reports whether a body on the start subject is a handoff start
// request (it names a handoff ID) rather than a new-session start.
func IsStart(data []byte) bool {
	var probe struct {
		HandoffID string `json:"handoffId"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.HandoffID != ""
}

// DecodeStart decodes a handoff start request strictly (unknown fields are
// refused).
func DecodeStart(data []byte) (StartRequest, error) {
	var req StartRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return StartRequest{}, fmt.Errorf("%w: start request: %w", ErrInvalid, err)
	}
	if req.HandoffID == "" {
		return StartRequest{}, fmt.Errorf("%w: start request without handoffId", ErrInvalid)
	}
	return req, nil
}

// Reply builds the answer to req from Activate's result.
func Reply(req StartRequest, act Activation, err error) StartReply {
	r := StartReply{HandoffID: req.HandoffID, SessionID: req.SessionID, DeploymentID: req.DeploymentID}
	if err != nil {
		r.Error = &ReplyError{Code: replyCode(err), Message: err.Error()}
		return r
	}
	r.Activated, r.Replayed = true, act.Replayed
	r.DeploymentID, r.OwnerRunID, r.Epoch = act.Session.Record.DeploymentID, act.Session.Record.OwnerRunID, act.Session.Record.Epoch
	return r
}

func replyCode(err error) string {
	switch {
	case errors.Is(err, ErrUncertain):
		return CodeUncertain
	case errors.Is(err, ErrRefused):
		return CodeRefused
	case errors.Is(err, ErrInvalid):
		return CodeBadRequest
	}
	return CodeUnavailable
}

// Responder answers handoff start requests for one owner process.
type Responder struct {
	Store Store
	// Candidate is this process; its RunID is replaced by NewRunID() for
	// every request.
	Candidate Candidate
	NewRunID  func() string
}

// Handle decodes a handoff start request, activates, and returns the reply
// to send together with Activate's result. The caller runs the session
// (runtime.BootHandoff, from act.Session) only when err is nil and
// act.Replayed is false — before or after sending the reply, either is
// safe: the claim CAS already fenced the source.
func (r Responder) Handle(ctx context.Context, data []byte) (StartReply, Activation, error) {
	req, err := DecodeStart(data)
	if err != nil {
		return StartReply{Error: &ReplyError{Code: CodeBadRequest, Message: err.Error()}}, Activation{}, err
	}
	c := r.Candidate
	if r.NewRunID != nil {
		c.RunID = r.NewRunID()
	}
	act, err := Activate(ctx, r.Store, req.Activate(), c)
	return Reply(req, act, err), act, err
}
