package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
)

// A session's delete (docs/api.md, "Deleting a session"): DELETE
// /v1/sessions/{id} and the delete operation over NATS. The ingress never
// removes anything itself: it records the delete in the delete index
// (where every owner's sweep finds it), writes the request into the ended
// session's record and asks any owner to carry it out, waiting up to
// Config.FinishWait for the answer — 200 with what was removed, or 202
// {"pending":true} when the owners' sweeps finish it later. A session
// that has not ended is 409 session_live, unless forced: then it is ended
// first (as POST /v1/sessions/{id}/end does) and deleted once its end
// is applied. A child whose parent lives is 409 child_of_live_parent, even
// forced: its parent's delete deletes it.

// Codes of the delete (docs/api.md).
const (
	CodeDeleted           = "deleted"              // 410: the session was deleted
	CodeSessionLive       = "session_live"         // 409: not ended (delete with ?force=true)
	CodeChildOfLiveParent = "child_of_live_parent" // 409: a child whose parent has not ended
)

// deletePoll paces the forced delete's reads while it waits for the end.
const deletePoll = 100 * time.Millisecond

// DeleteRequest is a delete of session SessionID; Force ends a live
// session first.
type DeleteRequest struct {
	SessionID string `json:"sessionId"`
	Force     bool   `json:"force,omitempty"`
}

// Deleted is the answer to a delete carried out: what it removed (the
// session's events, its blobs and their bytes) and the ended children
// deleted with it.
type Deleted struct {
	SessionID       string   `json:"sessionId"`
	Events          uint64   `json:"events"`
	Blobs           int      `json:"blobs"`
	Bytes           int64    `json:"bytes"`
	ChildrenDeleted []string `json:"childrenDeleted"`
}

// DeleteResult is a delete's answer: Deleted when it was carried out in
// time, else Pending (an owner's sweep carries it out).
type DeleteResult struct {
	Deleted *Deleted
	Pending bool
}

// MarshalJSON is the answer's body: Deleted, or {"pending":true}.
func (d DeleteResult) MarshalJSON() ([]byte, error) {
	if d.Deleted != nil {
		return json.Marshal(d.Deleted)
	}
	return []byte(`{"pending":true}`), nil
}

// ParseDelete parses the NATS delete's body: {"sessionId", "force"}.
func ParseDelete(b []byte) (DeleteRequest, error) {
	var r DeleteRequest
	if err := decodeStrict(b, &r, []string{"sessionId", "force"}); err != nil {
		return DeleteRequest{}, bad("%v", err)
	}
	if r.SessionID == "" {
		return DeleteRequest{}, bad("sessionId is required")
	}
	return r, checkSessionID(r.SessionID)
}

func (s *Server) httpDelete(w http.ResponseWriter, r *http.Request) error {
	req := DeleteRequest{SessionID: r.PathValue("id")}
	if err := checkSessionID(req.SessionID); err != nil {
		return err
	}
	if v := r.URL.Query().Get("force"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			return bad("force=%q is not true or false", clip(v))
		}
		req.Force = f
	}
	res, err := s.DeleteSession(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Pending {
		status = http.StatusAccepted
	}
	return writeJSON(w, status, res)
}

// DeleteSession deletes a session at its user's request (see the top of
// this file).
func (s *Server) DeleteSession(ctx context.Context, req DeleteRequest) (DeleteResult, error) {
	id := req.SessionID
	if err := checkSessionID(id); err != nil {
		return DeleteResult{}, err
	}
	a, err := s.topology(ctx)
	if err != nil {
		return DeleteResult{}, err
	}
	cur, err := s.deletable(ctx, a, id, req.Force)
	if err != nil {
		return DeleteResult{}, err
	}
	if err := a.store.AddDeletion(ctx, kv.Deletion{SessionID: id, Reason: record.DeleteByUser, Force: req.Force}); err != nil {
		return DeleteResult{}, fail(ErrUnavailable, "index the delete of session %s: %v", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.FinishWait)
	defer cancel()
	if cur.Record.State != record.StateEnded {
		if cur, err = s.endForDelete(wctx, a, cur); err != nil {
			return DeleteResult{}, err
		}
		if cur.Record.State != record.StateEnded {
			s.log.Warn("delete pending: the session's end is not applied yet; an owner's sweep deletes it once it is", "session", id)
			return DeleteResult{Pending: true}, nil
		}
	}
	if !cur.Record.FinishPending() {
		f := record.FinishRequest{Op: record.FinishDelete, Reason: record.DeleteByUser, By: "user-" + ulid.Make().String(), At: s.cfg.Now().UTC()}
		if _, err := a.store.RequestFinish(ctx, cur, f); err != nil && !errors.Is(err, record.ErrConflict) {
			return DeleteResult{}, fail(ErrUnavailable, "write the delete into session %s: %v", id, err)
		}
		// A conflict: another delete (or a sweep) wrote first; the request
		// stands either way, and the wait below reads the outcome.
	}
	rep, done := s.awaitDelete(wctx, id)
	if !done {
		s.log.Warn("delete pending: no owner carried it out in time; an owner's sweep does", "session", id, "wait", s.cfg.FinishWait)
		return DeleteResult{Pending: true}, nil
	}
	d := &Deleted{SessionID: id, ChildrenDeleted: orEmpty(rep.ChildrenDeleted)}
	if rm := rep.Removed; rm != nil {
		d.Events, d.Blobs, d.Bytes = rm.Events, rm.Blobs, rm.Bytes
	}
	s.log.Info("deleted a session at its user's request", "session", id, "events", d.Events, "blobs", d.Blobs, "bytes", d.Bytes)
	return DeleteResult{Deleted: d}, nil
}

// deletable reads session id from the leader and refuses a delete that
// cannot be: none (404), deleted (410 deleted), a child whose parent has
// not ended (409 child_of_live_parent), not ended and not forced (409
// session_live).
func (s *Server) deletable(ctx context.Context, a *attached, id string, force bool) (record.Session, error) {
	cur, err := a.store.LeaderSession(ctx, id)
	switch {
	case err != nil:
		return record.Session{}, sessionReadErr(id, err)
	case cur.Record.IsDeleted():
		return record.Session{}, deletedErr(id)
	}
	if parent := s.parentOf(ctx, cur.Record); parent != "" {
		p, err := a.store.LeaderSession(ctx, parent)
		switch {
		case err == nil && p.Record.State != record.StateEnded:
			return record.Session{}, &Error{Err: ErrConflict, Detail: CodeChildOfLiveParent,
				Message: "session " + id + " is a child of session " + parent + ", which has not ended: end or delete the parent"}
		case err != nil && !errors.Is(err, record.ErrNotFound):
			return record.Session{}, fail(ErrUnavailable, "read the parent of session %s: %v", id, err)
		}
	}
	if cur.Record.State != record.StateEnded && !force {
		return record.Session{}, &Error{Err: ErrConflict, Detail: CodeSessionLive,
			Message: "session " + id + " is " + string(cur.Record.State) + ": end it first, or delete it with ?force=true"}
	}
	return cur, nil
}

// endForDelete ends the live session cur (the user's end) and waits, until
// ctx ends, for the end to be applied; it returns the record as last read.
func (s *Server) endForDelete(ctx context.Context, a *attached, cur record.Session) (record.Session, error) {
	id := cur.Record.SessionID
	if !cur.Record.FinishPending() {
		_, err := s.EndSession(ctx, Request{Kind: wire.KindTerminate, SessionID: id})
		if err != nil && !errors.Is(err, ErrGone) {
			return cur, err
		}
	}
	for cur.Record.State != record.StateEnded {
		select {
		case <-ctx.Done():
			return cur, nil
		case <-time.After(deletePoll):
		}
		next, err := a.store.LeaderSession(ctx, id)
		if err != nil {
			continue
		}
		cur = next
	}
	return cur, nil
}

// awaitDelete asks any owner for session id's delete until one reports it
// done or ctx ends (done false).
func (s *Server) awaitDelete(ctx context.Context, id string) (protocol.FinishReply, bool) {
	data, _ := json.Marshal(protocol.FinishRequest{SessionID: id})
	for {
		var rep protocol.FinishReply
		msg, err := s.cfg.NC.RequestWithContext(ctx, s.cfg.Names.FinishAny(), data)
		if err == nil {
			err = json.Unmarshal(msg.Data, &rep)
		}
		switch {
		case err == nil && rep.Error == nil && rep.Outcome == protocol.FinishDeleted:
			return rep, true
		case errors.Is(err, nats.ErrNoResponders):
			return protocol.FinishReply{}, false // no owner runs at all
		}
		if done, ok := s.finishedMeanwhile(ctx, id); ok && done.Outcome == protocol.FinishDeleted {
			return done, true
		}
		select {
		case <-ctx.Done():
			return protocol.FinishReply{}, false
		case <-time.After(finishRetryPause):
		}
	}
}

// deletedErr is 410 deleted.
func deletedErr(id string) *Error {
	return &Error{Err: ErrGone, Detail: CodeDeleted, Message: "session " + id + " was deleted"}
}

// parentOf is the parent session of rec's session ("" for none): its
// checkpoint's, or, for a child whose first command (the parent's
// delivery) is not applied yet, the parentSessionId of the first command
// in its inbox — so a child just created is never deleted alone.
func (s *Server) parentOf(ctx context.Context, rec record.SessionRecord) string {
	cp, err := wire.DecodeCheckpoint(rec.Checkpoint)
	switch {
	case err != nil:
		return ""
	case cp.Parent != nil:
		return cp.Parent.SessionID
	case cp.Turn.Count > 0:
		return "" // a child's first turn is its parent's delivery, which records the parent
	}
	m, err := kv.NewStream(s.cfg.JS, s.cfg.Names.InboxStream()).Next(ctx, s.cfg.Names.Inbox(subjects.StableToken(rec.SessionID)), max(cp.Applied.Low, 1))
	if err != nil {
		return ""
	}
	var first struct {
		ParentSessionID string `json:"parentSessionId"`
	}
	if json.Unmarshal(m.Data, &first) != nil {
		return ""
	}
	return first.ParentSessionID
}
