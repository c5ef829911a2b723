package pool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serveStart answers a request on the start subject: a new session or a
// handoff start, as protocol.DecodeStart tells them apart.
// starter serves this deployment's start subject: a new session (its
// record, hooks and index entry, then its first run), and the target side
// of a handoff (docs/handoff.md: the activation). It claims through the
// registry and hands each claimed session to spawn.
type starter struct {
	cfg          *Config
	log          *slog.Logger
	fp           points
	lease        *lease
	reg          *registry
	env          *session.Env
	spawn        func(*session.Session, runtime.BootReason) // Owner.spawn
	restartLater func(id string, ran time.Duration)         // Owner.restartLater
}

func (o *starter) serveStart(msg *nats.Msg) {
	st, err := protocol.DecodeStart(msg.Data)
	switch {
	case st.Kind == protocol.StartHandoff && err != nil:
		respond(msg, handoff.Reply(st.Handoff, handoff.Activation{}, err))
	case st.Kind == protocol.StartHandoff:
		ctx := o.reg.serving()
		o.reg.goBG(ctx, func() { o.serveHandoff(ctx, msg, st.Handoff) })
	case err != nil:
		respond(msg, refuseStart(protocol.CodeBadRequest, err))
	default:
		respond(msg, o.start(o.reg.serving(), st.Session))
	}
}

// respond sends reply, JSON-encoded, as the answer to msg.
func respond(msg *nats.Msg, reply any) {
	data, _ := json.Marshal(reply)
	_ = msg.Respond(data)
}

func refuseStart(code protocol.Code, err error) protocol.StartReply {
	return protocol.StartReply{Error: protocol.Refuse(code, err)}
}

// start creates a session: index entry, record (epoch 1), stable hook, alias
// hooks (create-only; a taken alias rolls everything back and names the
// holder), then runs it.
func (o *starter) start(ctx context.Context, req protocol.StartRequest) protocol.StartReply {
	timeout, tokens, err := o.checkStart(req)
	if err != nil {
		return refuseStart(protocol.CodeBadRequest, err)
	}
	if !o.lease.valid() {
		return refuseStart(protocol.CodeUnavailable, ErrFenced)
	}
	id := cmp.Or(req.SessionID, newID())
	if req.SessionID != "" { // a child's: it may exist (a retried creation)
		if cur, err := o.cfg.Store.GetSession(ctx, id); err == nil {
			return o.existing(id, cur.Record.State == record.StateEnded)
		}
	}
	tokens = append([]string{subjects.StableToken(id)}, tokens...)
	// Reserved, so a sweep does not claim it before it runs, and counted
	// against MaxLoaded.
	ok, err := o.reg.reserve(ctx, id)
	switch {
	case err != nil:
		return refuseStart(protocol.CodeUnavailable, err)
	case !ok: // a requested ID that is running or loading here
		return o.existing(id, false)
	}
	defer o.reg.endLoad(id)
	s, replaced, holder, err := o.create(ctx, id, req, tokens, timeout)
	switch {
	case holder != nil:
		return protocol.StartReply{SessionID: holder.SessionID, DeploymentID: o.cfg.Deployment, Ended: holder.Ended, WireV: wire.CurrentVersion}
	case err != nil:
		o.log.Error("start failed", "err", err)
		return refuseStart(protocol.CodeUnavailable, err)
	}
	o.spawn(s, runtime.BootNew)
	o.log.Info("session started", "session", id, "aliases", req.Aliases, "tags", len(req.Tags), "replaced", replaced)
	return protocol.StartReply{SessionID: id, DeploymentID: o.cfg.Deployment, Created: true, Replaced: replaced, WireV: wire.CurrentVersion}
}

// existing answers a start whose requested session exists.
func (o *starter) existing(id string, ended bool) protocol.StartReply {
	return protocol.StartReply{SessionID: id, DeploymentID: o.cfg.Deployment, Ended: ended, WireV: wire.CurrentVersion}
}

func (o *starter) checkStart(req protocol.StartRequest) (time.Duration, []string, error) {
	if err := subjects.ValidateDeployment(req.DeploymentID); err != nil {
		return 0, nil, err
	}
	if req.SessionID != "" {
		if err := subjects.ValidateSessionID(req.SessionID); err != nil {
			return 0, nil, err
		}
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
	if err := wire.ValidateTags(req.Tags); err != nil {
		return 0, nil, fmt.Errorf("tags: %w", err)
	}
	toks, err := session.EncodedTokens("x", req.Aliases)
	if err != nil {
		return 0, nil, err
	}
	return timeout, toks[1:], nil
}

// create writes the new session's durable state; on a taken alias it undoes
// what it wrote and returns the holder. replaced names the ended session
// whose alias it took over (req.ReplaceEnded).
func (o *starter) create(ctx context.Context, id string, req protocol.StartRequest, tokens []string, timeout time.Duration) (s *session.Session, replaced string, holder *record.OwnedError, err error) {
	aliases := req.Aliases
	if err := o.cfg.Store.AddIndex(ctx, o.cfg.ProcessID, id); err != nil {
		return nil, "", nil, err
	}
	cp, err := session.EncodeNew(id, aliases, req.Tags)
	if err != nil {
		return nil, "", nil, err
	}
	rec, err := record.New(id, o.cfg.newOwner(), cp)
	if err != nil {
		return nil, "", nil, err
	}
	rev, err := o.cfg.Store.CreateSession(ctx, rec)
	var owned *record.OwnedError
	if errors.As(err, &owned) { // a requested ID another start created first
		_ = o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id)
		return nil, "", owned, nil
	}
	if err != nil {
		return nil, "", nil, err
	}
	if replaced, holder, err = o.claimHooks(ctx, id, aliases, tokens, req.ReplaceEnded); holder != nil || err != nil {
		o.undoCreate(ctx, id, rev, tokens)
		return nil, "", holder, err
	}
	s, err = session.New(o.env, session.Boot{Record: rec, Revision: rev, Checkpoint: session.NewCheckpoint(aliases, req.Tags), Tokens: tokens, Timeout: timeout})
	return s, replaced, nil, err
}

// claimHooks claims the session's stable token and its aliases, each
// create-only; with replaceEnded an alias whose session ended is taken
// over (takeOver). A taken one returns its holder.
func (o *starter) claimHooks(ctx context.Context, id string, aliases, tokens []string, replaceEnded bool) (string, *record.OwnedError, error) {
	replaced := ""
	for i, tok := range tokens {
		addr := id
		if i > 0 {
			addr = aliases[i-1]
		}
		h := record.Hook{Token: tok, Address: addr, SessionID: id, WireV: wire.CurrentVersion}
		_, err := o.cfg.Store.CreateHook(ctx, h)
		var owned *record.OwnedError
		if errors.As(err, &owned) && replaceEnded && i > 0 && o.ended(ctx, owned) {
			var prev string
			if prev, owned, err = o.takeOver(ctx, h); err == nil && owned == nil {
				replaced = prev
				continue
			}
		}
		if owned != nil {
			return "", owned, nil
		}
		if err != nil {
			return "", nil, err
		}
	}
	return replaced, nil, nil
}

// ended reports whether the holder of an alias has ended: its hook is a
// tombstone, or its record says ended (the ended session's clean-up
// tombstones its hooks a moment later, and skips one that names another
// session by then).
func (o *starter) ended(ctx context.Context, holder *record.OwnedError) bool {
	if holder.Ended {
		return true
	}
	cur, err := o.cfg.Store.LeaderSession(ctx, holder.SessionID)
	return err == nil && cur.Record.State == record.StateEnded
}

// takeOverAttempts bounds takeOver against hooks that keep changing.
const takeOverAttempts = 3

// takeOver replaces the hook of an ended session at alias hook h's token
// (a tombstone, or one its clean-up has not tombstoned yet) with h, by CAS
// at the revision read from the leader: of two starts racing for the
// alias one wins, the other is told the winner (a live holder). The
// alias's inbox subject is then purged up to the last message before the
// CAS — the ended session's, never one for the new session, which the
// ingress addresses only once the new hook is there — so the new
// session's consumer never reads them. It returns the ended session.
func (o *starter) takeOver(ctx context.Context, h record.Hook) (string, *record.OwnedError, error) {
	for range takeOverAttempts {
		cur, rev, err := o.cfg.Store.LeaderHook(ctx, h.Token)
		if errors.Is(err, record.ErrNotFound) { // deleted meanwhile: claim it afresh
			_, err = o.cfg.Store.CreateHook(ctx, h)
			var owned *record.OwnedError
			if errors.As(err, &owned) {
				continue
			}
			return "", nil, err
		}
		if err != nil {
			return "", nil, err
		}
		if holder := (&record.OwnedError{SessionID: cur.SessionID, Ended: cur.Tombstone}); !o.ended(ctx, holder) {
			return "", holder, nil
		}
		last, err := o.inboxLast(ctx, h.Token)
		if err != nil {
			return "", nil, err
		}
		if _, err := o.cfg.Store.UpdateHook(ctx, h, rev); errors.Is(err, record.ErrConflict) {
			continue
		} else if err != nil {
			return "", nil, err
		}
		if last > 0 {
			if err := o.purgeInbox(ctx, h.Token, last+1); err != nil {
				o.log.Warn("alias taken over; its ended session's commands not purged", "alias", h.Address, "err", err)
			}
		}
		o.log.Info("alias taken over from an ended session", "alias", h.Address, "session", h.SessionID, "ended", cur.SessionID)
		return cur.SessionID, nil, nil
	}
	return "", nil, fmt.Errorf("%w: alias %q changed %d times while being taken over", record.ErrConflict, h.Address, takeOverAttempts)
}

// undoCreate removes what create wrote, best effort: hooks that name this
// session, the record, the index entry.
func (o *starter) undoCreate(ctx context.Context, id string, rev uint64, tokens []string) {
	for _, tok := range tokens {
		if h, hrev, err := o.cfg.Store.GetHook(ctx, tok); err == nil && h.SessionID == id {
			_ = o.cfg.Store.DeleteHook(ctx, tok, hrev)
		}
	}
	// The index entry goes only with the record: a record left naming
	// this process is found by its index (sweep, adoption).
	if err := o.cfg.Store.DeleteSession(ctx, id, rev); err == nil {
		_ = o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id)
	}
}

// serveHandoff is the candidate side of a handoff (docs/handoff.md): index
// the session, activate it by the one claim CAS, answer, and run it
// (runtime.BootHandoff) when this request activated it.
func (o *starter) serveHandoff(ctx context.Context, msg *nats.Msg, req protocol.HandoffStart) {
	unavailable := func(err error) {
		respond(msg, protocol.HandoffStartReply{HandoffID: req.HandoffID, SessionID: req.SessionID, DeploymentID: req.DeploymentID,
			Error: protocol.Refuse(protocol.CodeUnavailable, err)})
	}
	if !o.lease.valid() {
		unavailable(ErrFenced)
		return
	}
	id := req.SessionID
	stages.Mark(id, "cand.recv")
	// A session that just moved away from this process may still be
	// stopping here (a quick A→B→A): give that run a moment to exit.
	o.reg.awaitStopped(id, localStopWait)
	if ok, err := o.reg.reserve(ctx, id); !ok {
		if err == nil {
			err = fmt.Errorf("session %s is already running or loading in process %s", id, o.cfg.ProcessID)
		}
		unavailable(err)
		return
	}
	defer o.reg.endLoad(id)
	// The index entry must exist before the claim (a crash right after it
	// is recovered from the index); it is written while Activate reads,
	// and the claim waits for it (BeforeClaim).
	indexed := make(chan error, 1)
	go func() { indexed <- o.cfg.Store.AddIndex(ctx, o.cfg.ProcessID, id) }()
	waitIndex := sync.OnceValue(func() error { return <-indexed })
	var d session.Checkpoint
	validate := func(cp []byte) error {
		if o.fp.refuseActivation(id) {
			return errors.New("fault: checkpoint refused")
		}
		if err := o.fp.readable(cp); err != nil {
			return err
		}
		dd, err := session.ReadCheckpoint(ctx, o.env, id, cp)
		if err != nil {
			return err
		}
		if err := session.CheckHandles(id, dd.Snap); err != nil {
			return err
		}
		d = dd
		return nil
	}
	act, err := handoff.Activate(ctx, o.cfg.Store, handoff.ActivateRequestFrom(req), handoff.Candidate{
		Deployment: o.cfg.Deployment, ProcessID: o.cfg.ProcessID, RunID: newID(),
		WireV: wire.CurrentVersion, Validate: validate, Failpoints: o.fp.r,
		BeforeClaim: waitIndex,
	})
	_ = waitIndex() // settled before a refusal removes the entry
	stages.Mark(id, "cand.activated")
	respond(msg, handoff.Reply(req, act, err))
	switch {
	case err == nil && !act.Replayed:
		arrival := &runtime.HandoffInfo{ID: req.HandoffID, From: act.From, Epoch: act.Session.Record.Epoch,
			Trigger: runtime.Ref{Seq: act.Trigger.Seq, ID: act.Trigger.CommandID}}
		s, err := o.adopted(ctx, act, d, arrival)
		if err != nil {
			o.log.Error("handed-off session could not start; restarting", "session", id, "err", err)
			o.restartLater(id, 0)
			return
		}
		o.spawn(s, runtime.BootHandoff)
		o.log.Info("session handed off to this process", "session", id, "handoff", req.HandoffID, "epoch", act.Session.Record.Epoch)
	case errors.Is(err, handoff.ErrUncertain):
		o.log.Warn("handoff activation uncertain; not running, loading later", "session", id, "handoff", req.HandoffID, "err", err)
		o.restartLater(id, 0)
	default:
		if err != nil {
			o.log.Info("handoff refused", "session", id, "handoff", req.HandoffID, "err", err)
		}
		if rerr := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); rerr != nil {
			o.log.Debug("remove index entry", "session", id, "err", rerr)
		}
	}
}

// adopted builds the session a handoff activated in this process, as claim
// does after its CAS; d is what the candidate's validation read.
func (o *starter) adopted(ctx context.Context, act handoff.Activation, d session.Checkpoint, arrival *runtime.HandoffInfo) (*session.Session, error) {
	rec := act.Session.Record
	d.SetFloor(rec)
	tokens, err := ownedTokens(ctx, o.cfg, o.log, rec.SessionID, d.Snap.Aliases)
	if err != nil {
		return nil, err
	}
	return session.New(o.env, session.Boot{Record: rec, Revision: act.Session.Revision, Checkpoint: d, Tokens: tokens,
		Predecessor: act.Predecessor, Arrival: arrival})
}

// inboxLast is the sequence of the last inbox message on token's subject
// (0: none), read from the stream leader.
func (o *starter) inboxLast(ctx context.Context, token string) (uint64, error) {
	m, err := kv.NewStream(o.cfg.JS, o.cfg.Names.InboxStream()).Last(ctx, o.cfg.Names.Inbox(token))
	switch {
	case errors.Is(err, record.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("inbox of %s: %w", token, err)
	}
	return m.Sequence, nil
}

// purgeInbox removes token's inbox messages below sequence below.
func (o *starter) purgeInbox(ctx context.Context, token string, below uint64) error {
	st, err := o.cfg.JS.Stream(ctx, o.cfg.Names.InboxStream())
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(o.cfg.Names.Inbox(token)), jetstream.WithPurgeSequence(below))
}
