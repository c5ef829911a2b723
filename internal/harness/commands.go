package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Deliver is a queued delivery of text.
func Deliver(text string) wire.Command {
	return wire.Command{Kind: wire.KindDeliver, Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}}}
}

// Steer is a steering delivery of text.
func Steer(text string) wire.Command {
	c := Deliver(text)
	c.Deliver.Mode = wire.ModeSteer
	return c
}

// WithID sets the command's ID.
func WithID(id string, c wire.Command) wire.Command {
	c.ID = id
	return c
}

// Control is a command without a body (cancel, reset, clear, compact, …).
func Control(kind wire.Kind) wire.Command { return wire.Command{Kind: kind} }

// InputResponse answers input request requestID with the JSON value.
func InputResponse(requestID, value string) wire.Command {
	return wire.Command{Kind: wire.KindInputResponse, InputResponse: &wire.InputResponse{RequestID: requestID, Value: json.RawMessage(value)}}
}

// AuthCallback answers authorization attempt attemptID.
func AuthCallback(attemptID, result string) wire.Command {
	return wire.Command{Kind: wire.KindAuthCallback, AuthCallback: &wire.AuthCallback{AttemptID: attemptID, Result: result}}
}

// TaskResult is a background task's JSON result.
func TaskResult(taskID, result string) wire.Command {
	return wire.Command{Kind: wire.KindTaskResult, TaskResult: &wire.TaskResult{TaskID: taskID, Result: json.RawMessage(result)}}
}

// Timeout fires timer timerID now.
func Timeout(timerID string) wire.Command {
	return wire.Command{Kind: wire.KindTimeout, Timeout: &wire.Timeout{TimerID: timerID, Deadline: time.Now().UTC()}}
}

// Move moves the session to deployment.
func Move(deployment string) wire.Command {
	return wire.Command{Kind: wire.KindMove, Move: &wire.Move{DeploymentID: deployment}}
}

// AddressToken is the inbox token of an address (a session ID's stable
// token is subjects.StableToken).
func AddressToken(addr string) (string, error) { return subjects.EncodeToken(addr) }

// Send stamps c as an ingress accepts a command — an ID c<n> if it has
// none, the current version, the acceptance time, e.Deployment if it names
// no accepting deployment — and publishes it to the inbox subject of token
// with its ID as the message ID. It returns the command as sent and its
// inbox sequence.
func (e *Env) Send(ctx context.Context, token string, c wire.Command) (wire.Command, uint64, error) {
	if c.ID == "" {
		c.ID = fmt.Sprintf("c%d", e.ids.Add(1))
	}
	c.V, c.AcceptedAt = wire.CurrentVersion, time.Now().UTC()
	if c.AcceptedDeploymentID == "" {
		c.AcceptedDeploymentID = e.Deployment
	}
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		return c, 0, err
	}
	ack, err := e.JS.Publish(ctx, e.Names.Inbox(token), data, jetstream.WithMsgID(c.ID))
	if err != nil {
		return c, 0, fmt.Errorf("send %s: %w", c.ID, err)
	}
	return c, ack.Sequence, nil
}

// SendTo is Send to the inbox of address addr (its token AddressToken).
func (e *Env) SendTo(ctx context.Context, addr string, c wire.Command) (wire.Command, uint64, error) {
	tok, err := AddressToken(addr)
	if err != nil {
		return c, 0, err
	}
	return e.Send(ctx, tok, c)
}

// Start sends a start request to req.DeploymentID (e.Deployment if empty)
// and returns the reply; a refusal in the reply is an error.
func (e *Env) Start(ctx context.Context, req protocol.StartRequest, timeout time.Duration) (protocol.StartReply, error) {
	if req.DeploymentID == "" {
		req.DeploymentID = e.Deployment
	}
	data, _ := json.Marshal(req)
	msg, err := e.NC.Request(e.Names.Start(req.DeploymentID), data, timeout)
	if err != nil {
		return protocol.StartReply{}, fmt.Errorf("start on %s: %w", req.DeploymentID, err)
	}
	var r protocol.StartReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return r, fmt.Errorf("start reply %s: %w", msg.Data, err)
	}
	if r.Error != nil {
		return r, fmt.Errorf("start on %s refused: %+v", req.DeploymentID, r.Error)
	}
	return r, nil
}

// Wake publishes a wake of the session to e.Deployment as the ingress does.
func (e *Env) Wake(sessionID string) error { return e.WakeOn(e.Deployment, sessionID) }

// WakeOn publishes a wake of the session to deployment as the ingress
// does: fire and forget.
func (e *Env) WakeOn(deployment, sessionID string) error {
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: sessionID, Source: protocol.WakeIngress})
	return e.NC.Publish(e.Names.Wake(deployment), data)
}

// WaitServing polls until deployment's start responder answers (any
// answer: the probe is not a valid request).
func (e *Env) WaitServing(ctx context.Context, deployment string, timeout time.Duration) error {
	if err := Poll(ctx, timeout, func() bool {
		_, err := e.NC.Request(e.Names.Start(deployment), []byte(`{`), time.Second)
		return err == nil
	}); err != nil {
		return fmt.Errorf("start responder of %s: %w", deployment, err)
	}
	return nil
}
