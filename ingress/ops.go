package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Receipt answers an accepted command: 202 {"sessionId","seq","created",
// "deploymentId","ownerLive"}. Seq is the command's BATON_INBOX stream
// sequence; DeploymentID the deployment that accepted it (the
// acceptedDeploymentId stamp: the agent's promoted deployment, else this
// ingress's --deployment-id); Created whether this request created the
// session. OwnerLive says whether an owner will act on it: false when the
// session's deployment has no live owner process and no live deployment
// adopts its sessions (the command waits in the inbox until one does). A
// repeat of an idempotent request returns the first receipt's session,
// created and deploymentId. CommandID is the id the ingress gave the
// command (a ULID; with an idempotencyKey the id derived from the key, so
// a repeat carries the first command's id); "" when nothing went to the
// inbox (seq 0). GET /v1/sessions/{id}/commands/{seq} tells its outcome.
type Receipt struct {
	SessionID    string `json:"sessionId"`
	Seq          uint64 `json:"seq"`
	CommandID    string `json:"commandId"`
	Created      bool   `json:"created"`
	DeploymentID string `json:"deploymentId"`
	OwnerLive    bool   `json:"ownerLive"`
	// PreviousSessionID names the ended session whose alias the created
	// session took over (Config.EndedAlias "new").
	PreviousSessionID string `json:"previousSessionId,omitempty"`
}

// Created answers POST /v1/sessions: 201 {"sessionId","deploymentId",
// "created":true}, plus "seq" and "commandId" (as Receipt's) when the
// request carried a first message.
type Created struct {
	SessionID         string `json:"sessionId"`
	DeploymentID      string `json:"deploymentId"`
	Created           bool   `json:"created"`
	Seq               uint64 `json:"seq,omitempty"`
	CommandID         string `json:"commandId,omitempty"`
	PreviousSessionID string `json:"previousSessionId,omitempty"` // as Receipt's
}

// Create starts a session on the deployment this ingress stamps (its
// agent's promoted one, else its own; docs/api.md): the owner claims the
// alias, if any, before it replies; then the first message, if any, is
// published. A taken alias is 409 (410 if its session ended) and writes
// nothing; a retired deployment with none promoted is 409
// deployment_retired; no owner answering is 503.
func (s *Server) Create(ctx context.Context, r Request) (Created, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return Created{}, err
	}
	cmd, data, err := s.prepare(a, &r)
	if err != nil {
		return Created{}, err
	}
	if err := s.aliasFree(ctx, a, r.Alias); err != nil {
		return Created{}, err
	}
	if err := s.checkStartMode(ctx, a, cmd.AcceptedDeploymentID, r.Configure); err != nil {
		return Created{}, err
	}
	rep, err := s.start(ctx, a, r.Alias, r.Timeout, r.Tags, s.replacesEnded())
	if err != nil {
		return Created{}, err
	}
	if !rep.Created {
		return Created{}, aliasTaken(r.Alias, rep.SessionID, rep.Ended)
	}
	s.met.created.Inc()
	out := Created{SessionID: rep.SessionID, DeploymentID: cmp.Or(rep.DeploymentID, cmd.AcceptedDeploymentID), Created: true,
		PreviousSessionID: rep.Replaced}
	t := target{sessionID: rep.SessionID, token: subjects.StableToken(rep.SessionID), wireV: versionOr(rep.WireV), deployment: out.DeploymentID, created: true}
	if err := s.configureNew(ctx, a, t, r); err != nil {
		return Created{}, err
	}
	if data == nil {
		return out, nil
	}
	rc, err := s.publish(ctx, a, t, cmd, data)
	if err != nil {
		e := asError(err)
		return Created{}, fail(e.Err, "%s (session %s was created; deliver the first message to it again)", e.Message, rep.SessionID)
	}
	out.Seq, out.CommandID = rc.Seq, rc.CommandID
	return out, nil
}

// aliasFree refuses an alias some session holds, before any owner is asked
// (so a refused create writes nothing).
func (s *Server) aliasFree(ctx context.Context, a *attached, alias string) error {
	if alias == "" {
		return nil
	}
	tok, err := subjects.EncodeToken(alias)
	if err != nil {
		return bad("alias: %v", err)
	}
	h, _, err := a.store.GetHook(ctx, tok)
	if err != nil {
		return nil
	}
	ended := s.holderEnded(ctx, a, h)
	if ended && s.replacesEnded() {
		return nil // an ended session's: the new one takes it over
	}
	return aliasTaken(alias, h.SessionID, ended)
}

// holderEnded reports whether the session hook h names has ended: a
// tombstone, or a record that says ended (its clean-up tombstones its
// hooks a moment later).
func (s *Server) holderEnded(ctx context.Context, a *attached, h record.Hook) bool {
	if h.Tombstone {
		return true
	}
	cur, err := a.sessionRecord(ctx, h.SessionID)
	return err == nil && cur.Record.State == record.StateEnded
}

func aliasTaken(alias, holder string, ended bool) error {
	if ended {
		return fail(ErrGone, "alias %q belongs to session %s, which has ended", clip(alias), holder)
	}
	return fail(ErrConflict, "alias %q belongs to session %s (deliver to it with POST /v1/deliveries)", clip(alias), holder)
}

// Deliver sends a delivery (resume-first): to the session it names, or to
// the session that holds its alias, or to a new session that claims the
// alias. See docs/api.md.
func (s *Server) Deliver(ctx context.Context, r Request) (Receipt, error) {
	return s.send(ctx, r, r.Alias != "")
}

// Send sends a command to an existing session: cancel, reset, clear,
// compact, input.response or auth.callback (and deliveries by session ID).
func (s *Server) Send(ctx context.Context, r Request) (Receipt, error) {
	return s.send(ctx, r, false)
}

func (s *Server) send(ctx context.Context, r Request, create bool) (Receipt, error) {
	start := time.Now()
	stages.Mark(r.SessionID, "ingress.parsed")
	a, err := s.topology(ctx)
	if err != nil {
		return Receipt{}, err
	}
	cmd, data, err := s.prepare(a, &r)
	if err != nil {
		return Receipt{}, err
	}
	if data == nil {
		return Receipt{}, bad("no command")
	}
	t, err := s.resolve(ctx, a, &r, create)
	if err != nil {
		return Receipt{}, err
	}
	stages.Mark(t.sessionID, "ingress.resolved")
	if r.Kind == wire.KindDeliver && !t.created {
		if err := s.agentMismatch(ctx, a, t.sessionID, t.deployment, s.agent()); err != nil {
			return Receipt{}, err
		}
	}
	if r.Kind == wire.KindTag && t.wireV >= wire.TagsVersion {
		if err := s.checkTagMerge(ctx, a, t.sessionID, r.Tag); err != nil {
			return Receipt{}, err
		}
	}
	if t, err = s.expect(ctx, a, t, &r, cmd.ID); err != nil {
		return Receipt{}, err
	}
	stages.Mark(t.sessionID, "ingress.checked")
	rc, err := s.publish(ctx, a, t, cmd, data)
	if err == nil {
		s.met.command.WithLabelValues(string(cmd.Kind)).Observe(time.Since(start).Seconds())
	}
	return rc, err
}

// prepare builds and encodes the command (current wire version), stamped
// with the deployment this ingress stamps now, before anything is looked
// up, so an invalid command is refused with nothing written. A request
// without a command (a bare create) returns a command with only its stamp
// and nil data.
func (s *Server) prepare(a *attached, r *Request) (wire.Command, []byte, error) {
	dep, _ := s.stamp(a)
	if r.Kind == "" {
		return wire.Command{AcceptedDeploymentID: dep}, nil, nil
	}
	cmd := r.command(dep, s.now())
	cmd.ID = ulid.Make().String()
	if r.IdempotencyKey != "" {
		cmd.ID = idemID(r.IdempotencyKey)
	}
	data, err := encode(wire.CurrentVersion, dep, cmd)
	return cmd, data, err
}

// publish appends the command to the target's inbox subject and wakes the
// session's deployment. data is cmd encoded for the current version; it is
// re-encoded when the owning deployment reads another (t.wireV, from the
// session record): a command that version cannot express is 422
// unsupported_command, and nothing is written.
func (s *Server) publish(ctx context.Context, a *attached, t target, cmd wire.Command, data []byte) (Receipt, error) {
	if t.wireV != wire.CurrentVersion {
		var err error
		if data, err = encode(t.wireV, t.deployment, cmd); err != nil {
			return Receipt{}, err
		}
	}
	data = s.forSuccessor(a, t, cmd, data)
	// An idempotent command's id is derived from its key, and its receipt
	// is stored under <sessionID>.<commandID>: a repeat that finds the
	// first receipt has the first command's id already.
	rc := Receipt{SessionID: t.sessionID, CommandID: cmd.ID, Created: t.created, DeploymentID: cmd.AcceptedDeploymentID,
		PreviousSessionID: t.previous, OwnerLive: s.ownerLive(a, t.deployment, cmd.AcceptedDeploymentID)}
	msgID := cmd.ID
	if cmd.IdempotencyKey != "" {
		msgID = t.sessionID + "/" + cmd.ID
		digest := commandDigest(cmd)
		var first receipt
		err := retryLeaderless(ctx, func(ctx context.Context) (err error) {
			first, err = a.receipts.claim(ctx, t.sessionID, cmd.ID, receipt{Created: t.created, DeploymentID: cmd.AcceptedDeploymentID, Digest: digest})
			return err
		})
		if err != nil {
			return Receipt{}, fail(ErrUnavailable, "%v", err)
		}
		if !first.matches(digest) {
			return Receipt{}, &Error{Err: ErrConflict, Detail: CodeIdempotencyConflict, Message: fmt.Sprintf(
				"idempotencyKey %q was used for a different command to session %s within the last %s; use a new key for a new command",
				clip(cmd.IdempotencyKey), t.sessionID, a.receipts.ttl)}
		}
		rc.Created, rc.DeploymentID = first.Created, first.DeploymentID
	}
	// Each attempt is bounded and sent again with the same message ID (the
	// stream deduplicates it): a publish the stream's dead leader swallowed
	// would otherwise hold the request for the client's whole timeout, well
	// past the election.
	var ack *jetstream.PubAck
	err := retryLeaderless(ctx, func(ctx context.Context) (err error) {
		ack, err = s.cfg.JS.Publish(ctx, s.cfg.Names.Inbox(t.token), data, jetstream.WithMsgID(msgID))
		return err
	})
	if err != nil {
		return Receipt{}, publishError(err)
	}
	stages.Mark(t.sessionID, "ingress.published")
	rc.Seq = ack.Sequence
	s.wake(t, cmd.AcceptedDeploymentID)
	return rc, nil
}

// forSuccessor re-encodes a command that the owners of another deployment
// will read after the handoff it triggers — one stamped with another
// deployment than the session's, or a move — at the newest version both
// the session's owners (t.wireV) and the successor's read, when the
// successor does not read t.wireV: a rollback to an older build must not
// meet its trigger in a version it rejects (wire.rejected: the delivery
// lost). The session's owners read every version up to theirs, so the
// command stays readable if no handoff happens. The successor's versions
// are those its owners advertised; a successor with live owners and no
// advertisement runs a build from before it, which reads version 1 only;
// one with neither cannot take the session now, and the command is left
// as it is. A command the successor's version cannot express keeps
// t.wireV (the successor rejects it loudly, as before).
func (s *Server) forSuccessor(a *attached, t target, cmd wire.Command, data []byte) []byte {
	to := cmd.AcceptedDeploymentID
	if cmd.Kind == wire.KindMove && cmd.Move != nil {
		to = cmd.Move.DeploymentID
	}
	if to == "" || to == t.deployment {
		return data
	}
	vs := a.fleet.Reads(to)
	if len(vs) == 0 && a.fleet.LiveOwners(to) > 0 {
		vs = []int{1}
	}
	v, ok := successorVersion(vs, t.wireV)
	if !ok || v == t.wireV {
		return data
	}
	b, err := encode(v, to, cmd)
	if err != nil {
		s.log.Warn("a command the successor's inbox version cannot express keeps the session owners' version",
			"session", t.sessionID, "successor", to, "version", v, "kind", cmd.Kind, "err", err)
		return data
	}
	return b
}

// successorVersion is the newest inbox version at most limit in vs; ok is
// false when there is none.
func successorVersion(vs []int, limit int) (int, bool) {
	v, ok := 0, false
	for _, x := range vs {
		if x <= limit && x > v {
			v, ok = x, true
		}
	}
	return v, ok
}

// wake tells the session's deployment, fire-and-forget over core NATS,
// that the session has a command (docs/runtime.md, hibernation). Nobody
// answering is fine: a loaded session reads its consumer anyway.
func (s *Server) wake(t target, stamp string) {
	if t.deployment == "" {
		return
	}
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: t.sessionID, Source: protocol.WakeIngress})
	if err := s.cfg.NC.Publish(s.cfg.Names.Wake(t.deployment), data); err != nil {
		s.log.Debug("wake not sent", "session", t.sessionID, "err", err)
	}
	// The stamped deployment too: if the session's deployment was retired,
	// or another promoted, and its owner is gone, an owner of the stamped
	// one adopts it.
	if t.deployment != stamp {
		if err := s.cfg.NC.Publish(s.cfg.Names.Wake(stamp), data); err != nil {
			s.log.Debug("wake not sent", "session", t.sessionID, "err", err)
		}
	}
}

// Bounds of a write to a stream that may be electing a leader (a
// nats-server died): each attempt waits attemptTimeout, and attempts go on
// for writeBudget, so a request waits at most about one election (4–9 s)
// plus one attempt.
const (
	attemptTimeout = time.Second
	writeBudget    = 12 * time.Second
)

// retryLeaderless runs op with each attempt bounded by attemptTimeout,
// again while it fails for want of a leader (a timeout, no responders, the
// cluster not available) and ctx and writeBudget allow. op must be safe to
// repeat: a publish with a message ID, a create-or-read.
func retryLeaderless(ctx context.Context, op func(context.Context) error) error {
	end := time.Now().Add(writeBudget)
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !leaderless(err) || time.Now().After(end) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond): // pacing of the attempts
		}
	}
}

// leaderless reports a failure that means "no leader answered (yet)":
// kv.Leaderless, or the attempt's own deadline (a request the dead server
// swallowed).
func leaderless(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || kv.Leaderless(err)
}

func publishError(err error) error {
	var api *jetstream.APIError
	if errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return fail(ErrTooLarge, "the command exceeds the server's message size limit: %v", err)
	}
	return fail(ErrUnavailable, "publish: %v", err)
}
