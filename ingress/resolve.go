package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// target is a resolved session: where to publish and whom to wake.
type target struct {
	sessionID  string
	token      string // inbox token addressed: the stable token or the alias's
	wireV      int    // inbox wire version the owner reads (record first, hook fallback)
	deployment string // the session's current deployment (wake subject)
	created    bool   // this request created the session
	previous   string // the ended session whose alias it took over
}

// resolve finds the session a request addresses (resume-first). With
// create set, an alias nobody holds starts a new session on this
// deployment that claims it; otherwise an unknown address is 404.
//
// The hook read is a hint (a direct get). Deciding is left to CASes: the
// owner claims an alias create-only before it replies, so of two requests
// that both read "no hook" one creates the session and the other is told
// the winner (created=false) and delivers there.
func (s *Server) resolve(ctx context.Context, a *attached, r *Request, create bool) (target, error) {
	if r.Alias == "" {
		return s.resolveID(ctx, a, r)
	}
	tok, err := subjects.EncodeToken(r.Alias)
	if err != nil {
		return target{}, bad("alias: %v", err)
	}
	var h record.Hook
	err = retryLeaderless(ctx, func(ctx context.Context) (err error) {
		h, _, err = a.store.GetHook(ctx, tok)
		return err
	})
	switch {
	case errors.Is(err, record.ErrNotFound) && r.Alias != "" && create:
		return s.startFor(ctx, a, r, tok)
	case errors.Is(err, record.ErrNotFound):
		return target{}, notFound(r)
	case err != nil:
		return target{}, fail(ErrUnavailable, "look up %s: %v", what(r), err)
	case h.Tombstone && create && s.replacesEnded():
		return s.startFor(ctx, a, r, tok) // --ended-alias new: a new session takes it over
	}
	t, err := s.session(ctx, a, h, tok)
	if create && s.replacesEnded() && errors.Is(err, ErrGone) {
		return s.startFor(ctx, a, r, tok) // ended, its hook not tombstoned yet
	}
	return t, err
}

// resolveID resolves a session ID. A record a run has written settles it
// alone (settles): the stable hook's tombstone is written only after the
// record says ended, and the hook's other parts are the ID's own token and
// a wire-version stamp the record carries too. The hook is read only
// when the record does not settle it: no record (404 unknown, or 503
// while it is being created), a record that cannot be read, one that no
// run has written yet (its hooks may still be claimed, or undone), or one
// without the stamp. One read per delivery instead of two
// (docs/performance.md, "One read per delivery by session ID").
func (s *Server) resolveID(ctx context.Context, a *attached, r *Request) (target, error) {
	tok := subjects.StableToken(r.SessionID)
	cur, rerr := a.sessionRecord(ctx, r.SessionID)
	if rerr == nil && settles(cur.Record) {
		return complete(record.Hook{Token: tok, SessionID: r.SessionID}, tok, cur, nil)
	}
	h, err := a.hook(ctx, tok)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return target{}, notFound(r)
	case err != nil:
		return target{}, fail(ErrUnavailable, "look up %s: %v", what(r), err)
	}
	return complete(h, tok, cur, rerr)
}

// settles reports whether a session's record resolves its ID without its
// stable hook: a run has written it (a new record is epoch 1 with write
// counter 0 until its first run commits, and its creator claims the hooks
// before starting that run, or undoes the record) and it carries the
// owners' wire-version stamp.
func settles(rec record.SessionRecord) bool {
	return rec.WireV != 0 && (rec.Epoch > 1 || rec.WriteCounter > 0)
}

// session completes a target from the hook of the address and the record.
func (s *Server) session(ctx context.Context, a *attached, h record.Hook, tok string) (target, error) {
	if h.Tombstone {
		return target{}, fail(ErrGone, "session %s has ended", h.SessionID)
	}
	cur, err := a.sessionRecord(ctx, h.SessionID)
	return complete(h, tok, cur, err)
}

// complete checks the hook and the record read for it. A session
// mid-handoff (state handoff, or a marker) is an ordinary target: the
// stream holds the command for whichever owner comes next.
func complete(h record.Hook, tok string, cur record.Session, err error) (target, error) {
	switch {
	case err == nil && cur.Record.IsDeleted():
		return target{}, deletedErr(h.SessionID)
	case h.Tombstone:
		return target{}, fail(ErrGone, "session %s has ended", h.SessionID)
	case errors.Is(err, record.ErrNotFound):
		return target{}, fail(ErrUnavailable, "session %s is being created or undone; retry", h.SessionID)
	case err != nil:
		return target{}, fail(ErrUnavailable, "read session %s: %v", h.SessionID, err)
	case cur.Record.State == record.StateEnded:
		return target{}, fail(ErrGone, "session %s has ended", h.SessionID)
	case cur.Record.FinishPending() && cur.Record.Finish.Op == record.FinishEnd:
		return target{}, fail(ErrGone, "session %s is ending (its end was accepted; an owner carries it out)", h.SessionID)
	}
	return target{sessionID: h.SessionID, token: tok, wireV: ownerVersion(cur.Record, h), deployment: cur.Record.DeploymentID}, nil
}

// ownerVersion is the inbox wire version a session's owner reads: the
// record's stamp (re-stamped at every claim and activation, so it follows
// the session to whichever deployment owns it now), else the hook's
// (written once, when the address was claimed), else this build's.
func ownerVersion(rec record.SessionRecord, h record.Hook) int {
	switch {
	case rec.WireV != 0:
		return rec.WireV
	case h.WireV != 0:
		return h.WireV
	}
	return wire.CurrentVersion
}

// startFor starts a session that claims the request's alias. A loser of
// the claim race is told the holder and delivers there.
func (s *Server) startFor(ctx context.Context, a *attached, r *Request, tok string) (target, error) {
	rep, err := s.start(ctx, a, r.Alias, r.Timeout, r.Tags, s.replacesEnded())
	if err != nil {
		return target{}, err
	}
	if rep.Created {
		s.met.created.Inc()
		dep, _ := s.stamp(a)
		return target{sessionID: rep.SessionID, token: tok, wireV: versionOr(rep.WireV), deployment: cmp.Or(rep.DeploymentID, dep),
			created: true, previous: rep.Replaced}, nil
	}
	if rep.Ended {
		return target{}, fail(ErrGone, "alias %q belongs to session %s, which has ended", clip(r.Alias), rep.SessionID)
	}
	h, _, err := a.store.GetHook(ctx, tok)
	if err == nil && h.SessionID == rep.SessionID {
		return s.session(ctx, a, h, tok)
	}
	// A lagging replica may not show the winner's hook yet: the reply
	// names the holder, and its stamp is this build's current version.
	return s.session(ctx, a, record.Hook{Token: tok, SessionID: rep.SessionID, WireV: rep.WireV}, tok)
}

// start asks an owner of the deployment this ingress stamps to create a
// session, claiming alias ("" for none) before it replies — taking it over
// from an ended session with replaceEnded — with tags (nil: none). A retired deployment is refused (409 deployment_retired), tags
// on a deployment that does not read them too (422 tags_unsupported); no
// responder, or none within StartTimeout, is unavailable: nothing was
// created by this request.
func (s *Server) start(ctx context.Context, a *attached, alias, timeout string, tags map[string]string, replaceEnded bool) (protocol.StartReply, error) {
	dep, _ := s.stamp(a)
	if a.fleet.Retired(dep) {
		return protocol.StartReply{}, &Error{Err: ErrConflict, Detail: CodeDeploymentRetired,
			Message: "deployment " + dep + " is retired and agent " + s.agent() + " has no other promoted; promote a deployment (POST /v1/admin/agents/" + s.agent() + "/promote) or un-retire " + dep + "; nothing was created"}
	}
	if err := s.checkStartTags(ctx, a, dep, tags); err != nil {
		return protocol.StartReply{}, err
	}
	req := protocol.StartRequest{DeploymentID: dep, Timeout: timeout, Tags: tags, ReplaceEnded: replaceEnded && alias != ""}
	if alias != "" {
		req.Aliases = []string{alias}
	}
	data, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	msg, err := s.cfg.NC.RequestWithContext(ctx, s.cfg.Names.Start(dep), data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return protocol.StartReply{}, fail(ErrUnavailable, "no owner of deployment %s is running", dep)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return protocol.StartReply{}, fail(ErrUnavailable, "no owner of deployment %s answered within %s", dep, s.cfg.StartTimeout)
	case err != nil:
		return protocol.StartReply{}, fail(ErrUnavailable, "start request: %v", err)
	}
	var rep protocol.StartReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.StartReply{}, fail(ErrUnavailable, "start reply: %v", err)
	}
	if rep.Error != nil {
		return protocol.StartReply{}, fail(byCode(rep.Error.Code), "owner refused the start: %s", rep.Error.Message)
	}
	if subjects.ValidateSessionID(rep.SessionID) != nil {
		return protocol.StartReply{}, fail(ErrUnavailable, "start reply names no session")
	}
	return rep, nil
}

func versionOr(v int) int {
	if v == 0 {
		return wire.CurrentVersion
	}
	return v
}

func notFound(r *Request) *Error {
	if r.Alias != "" {
		return fail(ErrNotFound, "no session has the alias %q", clip(r.Alias))
	}
	return fail(ErrNotFound, "no session %s", r.SessionID)
}

func what(r *Request) string {
	if r.Alias != "" {
		return "alias " + clip(r.Alias)
	}
	return "session " + r.SessionID
}

// A direct get is answered by any replica, which may not have applied a
// write made a moment ago (a session just created). Before the ingress
// answers "no such session" it asks the stream leader.

// hook reads an address's hook, confirming "not found" with the leader.
// Each read is bounded and tried again while the bucket answers with no
// leader (retryLeaderless): a read the connection's dead server swallowed
// must not hold the request for the client's whole timeout.
func (a *attached) hook(ctx context.Context, tok string) (h record.Hook, err error) {
	err = retryLeaderless(ctx, func(ctx context.Context) error {
		h, _, err = a.store.GetHook(ctx, tok)
		if errors.Is(err, record.ErrNotFound) {
			h, _, err = a.store.LeaderHook(ctx, tok)
		}
		return err
	})
	return h, err
}

// sessionRecord reads a session's record, confirming "not found" with the
// leader.
func (a *attached) sessionRecord(ctx context.Context, id string) (cur record.Session, err error) {
	err = retryLeaderless(ctx, func(ctx context.Context) error {
		cur, err = a.store.GetSession(ctx, id)
		if errors.Is(err, record.ErrNotFound) {
			cur, err = a.store.LeaderSession(ctx, id)
		}
		return err
	})
	return cur, err
}

// liveRecord is sessionRecord for a request about a session that must
// exist and not be deleted: 404 not_found, 503 when the record cannot be
// read, 410 deleted.
func (a *attached) liveRecord(ctx context.Context, id string) (record.Session, error) {
	cur, err := a.sessionRecord(ctx, id)
	switch {
	case err != nil:
		return cur, sessionReadErr(id, err)
	case cur.Record.IsDeleted():
		return cur, deletedErr(id)
	}
	return cur, nil
}
