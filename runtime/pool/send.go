package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Commands between sessions (subagents): a commit's sends leave here. Each
// is encoded for the receiver's inbox version (its session record's,
// re-stamped at every activation), published to its stable inbox with the
// command ID as message ID (a repeated send is deduplicated by the stream,
// and past its window by the receiver's applied IDs), and the receiver is
// woken. A send that names an alias creates its child first, on the exact
// deployment, through that deployment's start subject.

// sender performs a session's sends to other sessions: session.Sender on
// JetStream. It uses the process's lease (no send without it) and wakes
// receivers, and nothing else of the process.
type sender struct {
	cfg     *Config
	log     *slog.Logger
	metrics *metrics
	lease   *lease
	wake    func(deployment string, req protocol.WakeRequest)
}

// sendStartTimeout bounds one start request for a child.
const sendStartTimeout = 5 * time.Second

// errGone: the receiver has ended (or never existed).
var errGone = errors.New("receiver has ended")

// errNoOwner: no owner of the child's deployment answered its start.
var errNoOwner = errors.New("no owner answered")

// Send stores each send, retrying, except a child-creating one whose first
// attempt fails (no live owner of its deployment, or it is retired): that
// one is returned pending, for the session to retry outside its loop
// (SendPending), so a parent never waits on a deployment that may not come
// back.
func (o *sender) Send(ctx context.Context, from string, sends []runtime.Send) ([]runtime.Send, error) {
	var pending []runtime.Send
	for _, s := range sends {
		if s.Alias != "" {
			if !o.lease.valid() {
				return nil, ErrFenced
			}
			if err := o.trySend(ctx, from, s); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				o.log.Info("a child send is pending: retried outside the session loop", "from", from, "to", s.SessionID,
					"deployment", s.DeploymentID, "err", err)
				o.metrics.sent(s.Command.Kind, "pending")
				pending = append(pending, s)
			}
			continue
		}
		if err := o.sendOne(ctx, from, s); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

func (o *sender) ReadsInbox(ctx context.Context, deployment string, v int) (bool, error) {
	if deployment == o.cfg.Deployment {
		return v <= wire.CurrentVersion, nil
	}
	d, _, err := o.cfg.Store.GetDeployment(ctx, deployment)
	if err == nil && slices.Contains(d.WireVersions, v) {
		return true, nil
	}
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		return false, err
	}
	// A direct get is a hint that may lag on a cluster: "no" is confirmed
	// by the leader.
	vs, err := o.cfg.Store.DeploymentReads(ctx, deployment)
	if errors.Is(err, record.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(vs, v), nil
}

// sendOne retries one send until it is stored, dropped or the session
// stops.
func (o *sender) sendOne(ctx context.Context, from string, s runtime.Send) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	attempt := 0
	return backoff.Retry(func() error {
		if !o.lease.valid() {
			return backoff.Permanent(ErrFenced)
		}
		err := o.trySend(ctx, from, s)
		if err != nil && ctx.Err() == nil {
			o.metrics.sent(s.Command.Kind, "retried")
		}
		if attempt++; err != nil && attempt%10 == 1 {
			o.log.Warn("send to a session failed; retrying", "from", from, "to", s.SessionID, "kind", s.Command.Kind, "attempt", attempt, "err", err)
		}
		return err
	}, b)
}

func (o *sender) trySend(ctx context.Context, from string, s runtime.Send) error {
	v, dep, err := o.sendTarget(ctx, s)
	if errors.Is(err, errGone) {
		return o.receiverGone(ctx, from, s)
	}
	if err != nil {
		return err
	}
	data, err := wire.Encode(wire.Capability{V: v}, s.Command)
	if err != nil {
		o.log.Error("a command for another session cannot be encoded for it; dropped", "from", from, "to", s.SessionID,
			"kind", s.Command.Kind, "wire_version", v, "err", err)
		return o.receiverGone(ctx, from, s)
	}
	subj := o.cfg.Names.Inbox(subjects.StableToken(s.SessionID))
	if _, err := o.cfg.JS.Publish(ctx, subj, data, jetstream.WithMsgID(s.Command.ID)); err != nil {
		return fmt.Errorf("publish %s to %s: %w", s.Command.Kind, s.SessionID, err)
	}
	o.wake(dep, protocol.WakeRequest{SessionID: s.SessionID, Source: protocol.WakeChild})
	o.metrics.sent(s.Command.Kind, "sent")
	return nil
}

// sendTarget returns the receiver's inbox version and deployment, creating
// it first when the send names an alias.
func (o *sender) sendTarget(ctx context.Context, s runtime.Send) (int, string, error) {
	var rep protocol.StartReply
	if s.Alias != "" {
		var err error
		rep, err = o.startChild(ctx, s)
		if errors.Is(err, errNoOwner) {
			// The child may exist (a send repeated after a reboot): a send
			// to an existing child is stored and woken whether or not its
			// owners run.
			return o.existingChild(ctx, s, err)
		}
		if err != nil {
			return 0, "", err
		}
		if rep.Ended {
			return 0, "", errGone
		}
		if rep.Created {
			return versionOr(rep.WireV), rep.DeploymentID, nil
		}
	}
	cur, err := o.cfg.Store.GetSession(ctx, s.SessionID)
	if errors.Is(err, record.ErrNotFound) {
		cur, err = o.cfg.Store.LeaderSession(ctx, s.SessionID)
	}
	switch {
	case errors.Is(err, record.ErrNotFound) && rep.SessionID != "":
		return versionOr(rep.WireV), rep.DeploymentID, nil
	case errors.Is(err, record.ErrNotFound):
		return 0, "", errGone
	case err != nil:
		return 0, "", err
	case cur.Record.State == record.StateEnded:
		return 0, "", errGone
	}
	return versionOr(cur.Record.WireV), cur.Record.DeploymentID, nil
}

// startChild asks an owner of the send's deployment to create the child
// under its alias and derived session ID (or to name the existing one).
func (o *sender) startChild(ctx context.Context, s runtime.Send) (protocol.StartReply, error) {
	req := protocol.StartRequest{DeploymentID: s.DeploymentID, Aliases: []string{s.Alias}, SessionID: s.SessionID, Tags: s.Tags}
	data, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, sendStartTimeout)
	defer cancel()
	msg, err := o.cfg.NC.RequestWithContext(rctx, o.cfg.Names.Start(s.DeploymentID), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return protocol.StartReply{}, fmt.Errorf("create child %s: %w: no owner of deployment %s is running", s.SessionID, errNoOwner, s.DeploymentID)
	}
	if err != nil {
		return protocol.StartReply{}, fmt.Errorf("create child %s: %w", s.SessionID, err)
	}
	var rep protocol.StartReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.StartReply{}, fmt.Errorf("create child %s: reply: %w", s.SessionID, err)
	}
	if rep.Error != nil {
		return protocol.StartReply{}, fmt.Errorf("create child %s: %s: %s", s.SessionID, rep.Error.Code, rep.Error.Message)
	}
	if rep.SessionID != s.SessionID {
		o.log.Error("a child's alias belongs to another session", "child", s.SessionID, "holder", rep.SessionID, "alias", s.Alias)
		return protocol.StartReply{}, errGone
	}
	return rep, nil
}

// receiverGone handles a send whose receiver has ended: a delegation
// becomes a failed result for the sender's own handle (so the handle does
// not stay active for ever); anything else is dropped.
func (o *sender) receiverGone(ctx context.Context, from string, s runtime.Send) error {
	c := s.Command
	o.metrics.sent(c.Kind, "dropped")
	if c.Kind != wire.KindDeliver || c.ParentSessionID != from {
		o.log.Debug("command for an ended session dropped", "from", from, "to", s.SessionID, "kind", c.Kind)
		return nil
	}
	err := o.failDelegation(ctx, from, s, "gone", "ended",
		wire.ChildErrorText(wire.CodeChildGone, "session "+s.SessionID+" has ended or cannot read the delegation"))
	if errors.Is(err, errEncode) {
		return backoff.Permanent(err)
	}
	return err
}

// errEncode: a derived command could not be encoded (never retried).
var errEncode = errors.New("encode a derived command")

// failDelegation publishes the failed child.result of delegation s to the
// sender's own inbox (its handle closes with ended): command and message
// ID <child>/<what>/<delegation ID>, so a repeat is deduplicated and the
// machine applies it once like any child result.
func (o *sender) failDelegation(ctx context.Context, from string, s runtime.Send, what, ended, errText string) error {
	c := s.Command
	id := clipID(s.SessionID + "/" + what + "/" + c.ID)
	data, err := wire.Encode(wire.Current(), wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindChildResult, ID: id,
		AcceptedDeploymentID: o.cfg.Deployment, AcceptedAt: o.cfg.Now().UTC(),
		ChildResult: &wire.ChildResult{Handle: c.Handle, ChildSessionID: s.SessionID, CommandID: c.ID, TurnID: runtime.NoChildTurn,
			Outcome: wire.ChildFailed, Error: errText, Ended: ended},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errEncode, err)
	}
	_, err = o.cfg.JS.Publish(ctx, o.cfg.Names.Inbox(subjects.StableToken(from)), data, jetstream.WithMsgID(id))
	return err
}

// clipID keeps a derived command ID within wire's 128 characters.
func clipID(id string) string {
	if len(id) > 128 {
		return id[len(id)-128:]
	}
	return id
}

func versionOr(v int) int {
	if v == 0 {
		return wire.CurrentVersion
	}
	return v
}
