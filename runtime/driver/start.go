package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// StartRequest is the body of a request on baton.deploy.<deploymentID>.start
// that creates a new session. DeploymentID must name the receiver exactly.
type StartRequest struct {
	DeploymentID string   `json:"deploymentId"`
	Aliases      []string `json:"aliases,omitempty"` // raw addresses to claim
	Timeout      string   `json:"timeout,omitempty"` // Go duration: session lifetime
}

// StartReply answers a StartRequest. When an alias was already taken,
// SessionID names the session that holds it and Created is false.
type StartReply struct {
	SessionID    string      `json:"sessionId,omitempty"`
	DeploymentID string      `json:"deploymentId,omitempty"`
	Created      bool        `json:"created"`
	Ended        bool        `json:"ended,omitempty"` // the alias belongs to an ended session
	WireV        int         `json:"wireVersion,omitempty"`
	Error        *ReplyError `json:"error,omitempty"`
}

// ReplyError is a machine-readable refusal (codes as the ingress's).
type ReplyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (o *Owner) serveStart(msg *nats.Msg) {
	var req StartRequest
	reply := StartReply{}
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		reply.Error = &ReplyError{Code: "bad_request", Message: "start request: " + err.Error()}
	} else {
		reply = o.start(o.servingCtx(), req)
	}
	data, _ := json.Marshal(reply)
	_ = msg.Respond(data)
}

// start creates a session: index entry, record (epoch 1), stable hook, alias
// hooks (create-only; a taken alias rolls everything back and names the
// holder), then runs it.
func (o *Owner) start(ctx context.Context, req StartRequest) StartReply {
	timeout, tokens, err := o.checkStart(req)
	if err != nil {
		return StartReply{Error: &ReplyError{Code: "bad_request", Message: err.Error()}}
	}
	if !o.leaseValid() {
		return StartReply{Error: &ReplyError{Code: "unavailable", Message: ErrFenced.Error()}}
	}
	id := newID()
	tokens = append([]string{subjects.StableToken(id)}, tokens...)
	o.beginLoad(id) // a sweep must not claim it before it runs
	defer o.endLoad(id)
	s, holder, err := o.create(ctx, id, req.Aliases, tokens, timeout)
	switch {
	case holder != nil:
		return StartReply{SessionID: holder.SessionID, DeploymentID: o.cfg.Deployment, Ended: holder.Ended, WireV: wire.CurrentVersion}
	case err != nil:
		o.log.Error("start failed", "err", err)
		return StartReply{Error: &ReplyError{Code: "unavailable", Message: err.Error()}}
	}
	o.spawn(s, runtime.BootNew)
	o.log.Info("session started", "session", id, "aliases", req.Aliases)
	return StartReply{SessionID: id, DeploymentID: o.cfg.Deployment, Created: true, WireV: wire.CurrentVersion}
}

func (o *Owner) checkStart(req StartRequest) (time.Duration, []string, error) {
	if err := subjects.ValidateDeployment(req.DeploymentID); err != nil {
		return 0, nil, err
	}
	if req.DeploymentID != o.cfg.Deployment {
		return 0, nil, fmt.Errorf("start for deployment %q reached deployment %q", req.DeploymentID, o.cfg.Deployment)
	}
	var timeout time.Duration
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d < 0 {
			return 0, nil, fmt.Errorf("timeout %q: want a positive Go duration", req.Timeout)
		}
		timeout = d
	}
	toks, err := encodedTokens("x", req.Aliases)
	if err != nil {
		return 0, nil, err
	}
	return timeout, toks[1:], nil
}

// create writes the new session's durable state; on a taken alias it undoes
// what it wrote and returns the holder.
func (o *Owner) create(ctx context.Context, id string, aliases, tokens []string, timeout time.Duration) (*session, *kv.OwnedError, error) {
	if err := o.cfg.Store.AddIndex(ctx, o.cfg.ProcessID, id); err != nil {
		return nil, nil, err
	}
	run := newID()
	snap := runtime.Snapshot{Aliases: aliases}
	cp, err := encodeCheckpoint(id, tokens, snap, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	rec := kv.SessionRecord{
		SessionID: id, OwnerRunID: run, DeploymentID: o.cfg.Deployment, Epoch: 1,
		OwnerProcess: o.cfg.ProcessID, State: kv.StateActive, Consumer: subjects.Consumer(id, 1),
		WireV: wire.CurrentVersion, Writer: run, Checkpoint: cp,
	}
	rev, err := o.cfg.Store.CreateSession(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	if holder, err := o.claimHooks(ctx, id, aliases, tokens); holder != nil || err != nil {
		o.undoCreate(ctx, id, rev, tokens)
		return nil, holder, err
	}
	s, err := o.newSession(rec, rev, snap, tokens, timeout)
	return s, nil, err
}

func (o *Owner) claimHooks(ctx context.Context, id string, aliases, tokens []string) (*kv.OwnedError, error) {
	for i, tok := range tokens {
		addr := id
		if i > 0 {
			addr = aliases[i-1]
		}
		_, err := o.cfg.Store.CreateHook(ctx, kv.Hook{Token: tok, Address: addr, SessionID: id, WireV: wire.CurrentVersion})
		var owned *kv.OwnedError
		if errors.As(err, &owned) {
			return owned, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// undoCreate removes what create wrote, best effort: hooks that name this
// session, the record, the index entry.
func (o *Owner) undoCreate(ctx context.Context, id string, rev uint64, tokens []string) {
	for _, tok := range tokens {
		if h, hrev, err := o.cfg.Store.GetHook(ctx, tok); err == nil && h.SessionID == id {
			_ = o.cfg.Store.DeleteHook(ctx, tok, hrev)
		}
	}
	_ = o.cfg.Store.DeleteSession(ctx, id, rev)
	_ = o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id)
}
