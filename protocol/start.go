package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// StartRequest is the body of a request on baton.deploy.<deploymentId>.start
// that creates a new session. DeploymentID must name the receiver exactly.
type StartRequest struct {
	DeploymentID string   `json:"deploymentId"`
	Aliases      []string `json:"aliases,omitempty"` // raw addresses to claim
	Timeout      string   `json:"timeout,omitempty"` // Go duration: session lifetime
	// SessionID asks for this session ID (a child session's, derived from
	// its parent, handle and generation); empty: the owner picks one. A
	// session that already has it is answered like a taken alias.
	SessionID string `json:"sessionId,omitempty"`
	// Tags are the new session's tags (at most wire.MaxTags). Only a
	// deployment whose owners advertise inbox version wire.TagsVersion
	// reads them: an older owner would ignore the member, so the
	// ingress, and a parent delegating with tags, send a start with tags
	// to no other (the ingress answers 422 tags_unsupported).
	Tags map[string]string `json:"tags,omitempty"`
	// ReplaceEnded lets the new session take over an alias whose session
	// has ended (the ingress's --ended-alias new): the alias's tombstone
	// is replaced by CAS, so of two racing starts one takes it and the
	// other is told the winner. An owner of a build before it ignores the
	// member and answers the ended holder (Ended).
	ReplaceEnded bool `json:"replaceEnded,omitempty"`
}

// StartReply answers a StartRequest. When an alias was already taken,
// SessionID names the session that holds it and Created is false. Its error
// codes: CodeBadRequest, CodeUnavailable.
type StartReply struct {
	SessionID    string `json:"sessionId,omitempty"`
	DeploymentID string `json:"deploymentId,omitempty"`
	Created      bool   `json:"created"`
	Ended        bool   `json:"ended,omitempty"` // the alias belongs to an ended session
	// Replaced names the ended session whose alias the created session
	// took over (ReplaceEnded).
	Replaced string      `json:"replaced,omitempty"`
	WireV    int         `json:"wireVersion,omitempty"`
	Error    *ReplyError `json:"error,omitempty"`
}

// HandoffStart is the body of a handoff start request on
// baton.deploy.<deploymentId>.start: activate the session staged at
// ExpectedRevision for this handoff. A non-empty HandoffID is what makes a
// start body a handoff start (see DecodeStart).
type HandoffStart struct {
	DeploymentID     string `json:"deploymentId"`
	HandoffID        string `json:"handoffId"`
	SessionID        string `json:"sessionId"`
	ExpectedRevision uint64 `json:"expectedRevision"`
}

// HandoffStartReply answers a HandoffStart. Activated is true only after the
// candidate's claim CAS landed (or, with Replayed, had landed for an earlier
// request with the same handoff ID). Its error codes: CodeRefused,
// CodeBadRequest, CodeUnavailable (all definite: not activated) and
// CodeUncertain.
type HandoffStartReply struct {
	Activated    bool        `json:"activated"`
	Replayed     bool        `json:"replayed,omitempty"`
	HandoffID    string      `json:"handoffId,omitempty"`
	SessionID    string      `json:"sessionId,omitempty"`
	DeploymentID string      `json:"deploymentId,omitempty"`
	OwnerRunID   string      `json:"ownerRunId,omitempty"`
	Epoch        uint64      `json:"epoch,omitempty"`
	Error        *ReplyError `json:"error,omitempty"`
}

// StartKind says which request a body of the start subject is.
type StartKind int

// Start kinds.
const (
	StartSession StartKind = iota + 1 // a StartRequest: create a session
	StartHandoff                      // a HandoffStart: activate a handoff successor
)

func (k StartKind) String() string {
	switch k {
	case StartSession:
		return "session start"
	case StartHandoff:
		return "handoff start"
	}
	return fmt.Sprintf("StartKind(%d)", int(k))
}

// Start is a decoded body of the start subject: Session or Handoff, as Kind
// says; the other is zero.
type Start struct {
	Kind    StartKind
	Session StartRequest
	Handoff HandoffStart
}

// startBody is a new-session start plus the field that makes a body a
// handoff start: one decode reads what a session start needs and says
// which kind the body is.
type startBody struct {
	StartRequest
	HandoffID string `json:"handoffId"`
}

// DecodeStart decodes a body of the start subject. A body with a non-empty
// handoffId is a handoff start, decoded strictly (DecodeHandoffStart); any
// other is a new-session start, whose unknown fields are ignored. On an
// error, Kind still says how to answer: StartHandoff once the body named a
// handoff, StartSession otherwise. Errors wrap ErrMalformed.
func DecodeStart(data []byte) (Start, error) {
	var b startBody
	if err := json.Unmarshal(data, &b); err != nil {
		return Start{Kind: StartSession}, malformed("start request", err)
	}
	if b.HandoffID == "" {
		return Start{Kind: StartSession, Session: b.StartRequest}, nil
	}
	h, err := DecodeHandoffStart(data)
	return Start{Kind: StartHandoff, Handoff: h}, err
}

// DecodeHandoffStart decodes a handoff start strictly: an unknown field (a
// new-session start's aliases, say) or an empty handoffId is refused, so a
// body is never half one kind and half the other. Errors wrap ErrMalformed.
func DecodeHandoffStart(data []byte) (HandoffStart, error) {
	var req HandoffStart
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return HandoffStart{}, malformed("handoff start request", err)
	}
	if req.HandoffID == "" {
		return HandoffStart{}, fmt.Errorf("%w: handoff start request without handoffId", ErrMalformed)
	}
	return req, nil
}

func malformed(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
}
