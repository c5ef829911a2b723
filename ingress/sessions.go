package ingress

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// Bounds of a session listing page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// CodeBadCursor is the finer code of a listing cursor that is malformed or
// was issued for other filters (400).
const CodeBadCursor = "bad_cursor"

// waitFilters are the values of a listing's waiting filter.
var waitFilters = []string{record.WaitInput, record.WaitAuthorization, record.WaitTask, record.WaitChild, "any"}

// tagKeyRE is a tag key: [a-z0-9_.-]{1,64}.
var tagKeyRE = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// MaxTagValueBytes bounds a tag's value.
const MaxTagValueBytes = 256

// SessionList answers GET /v1/admin/sessions.
type SessionList struct {
	Sessions []ListedSession `json:"sessions"`
	Next     string          `json:"next,omitempty"` // pass as ?cursor= for the next page; absent on the last
}

// ListedSession is one session of a listing: the index's entry, and what
// the record says at page time (never stale): idle, eventSeq, usage,
// lastActivityAt, and every wait (the durable ones and the transient
// step, handoff, paused and quarantined).
type ListedSession struct {
	SessionID       string            `json:"sessionId"`
	Agent           string            `json:"agent"`
	DeploymentID    string            `json:"deploymentId"`
	State           string            `json:"state"`
	Tags            map[string]string `json:"tags"`
	Aliases         []string          `json:"aliases"`
	ParentSessionID string            `json:"parentSessionId,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
	WaitingFor      []record.Wait     `json:"waitingFor"`
	Idle            bool              `json:"idle"`
	Why             string            `json:"why"`
	EventSeq        uint64            `json:"eventSeq"`
	Usage           wire.Usage        `json:"usage"`
	LastActivityAt  time.Time         `json:"lastActivityAt"`
}

var listKeys = []string{"agent", "deployment", "state", "tag", "waiting", "parent", "limit", "cursor"}

func (s *Server) sessionRoutes(mux *http.ServeMux) {
	s.route(mux, "GET /v1/admin/sessions", s.admin(s.httpListSessions))
	s.route(mux, "POST /v1/admin/index/rebuild", s.admin(s.httpRebuildIndex))
	s.route(mux, "GET /v1/sessions", s.user(s.httpStatusByAlias))
}

// parseListQuery reads a listing's filters, limit and cursor.
func parseListQuery(r *http.Request) (kv.IndexQuery, int, string, error) {
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(listKeys, k) {
			return kv.IndexQuery{}, 0, "", bad("unknown query parameter %q (allowed: %s)", clip(k), strings.Join(listKeys, ", "))
		}
		if k != "tag" && len(vs) > 1 {
			return kv.IndexQuery{}, 0, "", bad("query parameter %q given %d times", k, len(vs))
		}
	}
	iq := kv.IndexQuery{Agent: q.Get("agent"), Deployment: q.Get("deployment"), State: q.Get("state"),
		Waiting: q.Get("waiting"), Parent: q.Get("parent")}
	switch {
	case iq.Agent != "" && subjects.ValidateAgent(iq.Agent) != nil:
		return iq, 0, "", bad("agent %q: want [a-z0-9][a-z0-9_-]{0,63}", clip(iq.Agent))
	case iq.Deployment != "" && subjects.ValidateDeployment(iq.Deployment) != nil:
		return iq, 0, "", invalidDeployment(iq.Deployment, subjects.ValidateDeployment(iq.Deployment))
	case iq.State != "" && !record.State(iq.State).Valid():
		return iq, 0, "", bad("state %q: want active, handoff, hibernated, paused, ended or quarantined", clip(iq.State))
	case iq.Waiting != "" && !slices.Contains(waitFilters, iq.Waiting):
		return iq, 0, "", bad("waiting %q: want %s", clip(iq.Waiting), strings.Join(waitFilters, ", "))
	case iq.Parent != "" && subjects.ValidateSessionID(iq.Parent) != nil:
		return iq, 0, "", bad("parent %q: not a session ID", clip(iq.Parent))
	}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, ":")
		if !ok || !tagKeyRE.MatchString(k) || len(v) > MaxTagValueBytes {
			return iq, 0, "", bad("tag %q: want key:value, the key [a-z0-9_.-]{1,64}, the value at most %d bytes", clip(t), MaxTagValueBytes)
		}
		if iq.Tags == nil {
			iq.Tags = map[string]string{}
		}
		if prev, dup := iq.Tags[k]; dup && prev != v {
			return iq, 0, "", bad("tag %q given twice with different values", clip(k))
		}
		iq.Tags[k] = v
	}
	limit := DefaultListLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > MaxListLimit {
			return iq, 0, "", bad("limit %q: want an integer from 1 to %d", clip(q.Get("limit")), MaxListLimit)
		}
		limit = n
	}
	return iq, limit, q.Get("cursor"), nil
}

func (s *Server) httpListSessions(w http.ResponseWriter, r *http.Request) error {
	q, limit, cursor, err := parseListQuery(r)
	if err != nil {
		return err
	}
	list, err := s.ListSessions(r.Context(), q, cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, list)
}

// ListSessions is one page of the sessions matching q, newest first by
// creation time (kv.Index.List): the index names them, and each one's
// record, read at page time (≤ limit direct gets), gives what is never
// stale and re-checks the filters — an entry the record contradicts (an
// index write not yet made or healed) is left out of the page.
func (s *Server) ListSessions(ctx context.Context, q kv.IndexQuery, cursor string, limit int) (SessionList, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return SessionList{}, err
	}
	x, err := a.sessionIndex(ctx, s)
	if err != nil {
		return SessionList{}, err
	}
	page, err := x.List(ctx, q, cursor, limit)
	if errors.Is(err, kv.ErrBadCursor) {
		return SessionList{}, &Error{Err: ErrBadRequest, Detail: CodeBadCursor, Message: "cursor: " + err.Error()}
	}
	if err != nil {
		return SessionList{}, fail(ErrUnavailable, "list the session index: %v", err)
	}
	listed := make([]*ListedSession, len(page.Entries))
	errs := make([]error, len(page.Entries))
	var wg sync.WaitGroup
	for i, e := range page.Entries {
		wg.Go(func() { listed[i], errs[i] = s.listed(ctx, a, q, e) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return SessionList{}, fail(ErrUnavailable, "read sessions: %v", err)
	}
	out := SessionList{Sessions: []ListedSession{}, Next: page.Next}
	for _, l := range listed {
		if l != nil {
			out.Sessions = append(out.Sessions, *l)
		}
	}
	return out, nil
}

// listed completes an entry from its record, or is nil when the record is
// gone or no longer matches q.
func (s *Server) listed(ctx context.Context, a *attached, q kv.IndexQuery, e record.IndexEntry) (*ListedSession, error) {
	cur, err := a.store.GetSession(ctx, e.SessionID)
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec := cur.Record
	cp, readable, err := readCheckpoint(rec)
	if err != nil {
		return nil, err
	}
	fresh := record.DeriveIndex(rec, cur.Revision, cp, e.Agent)
	fresh.Tags = e.Tags
	if !readable {
		fresh.WaitingFor = e.WaitingFor // what the index last knew
	}
	if !q.Matches(fresh) {
		return nil, nil
	}
	l := &ListedSession{SessionID: e.SessionID, Agent: e.Agent, DeploymentID: rec.DeploymentID, State: string(rec.State),
		Tags: e.Tags, Aliases: fresh.Aliases, ParentSessionID: fresh.ParentSessionID, CreatedAt: e.CreatedAt,
		WaitingFor: record.WaitingFor(rec, cp), EventSeq: rec.EventSeq(cp.EventSeq), Usage: cp.Usage, LastActivityAt: rec.UpdatedAt}
	if l.Tags == nil {
		l.Tags = map[string]string{}
	}
	if l.Aliases == nil {
		l.Aliases = []string{}
	}
	if rec.Quarantined() {
		l.Why = string(record.StateQuarantined)
	} else if readable {
		why, _, err := s.notIdle(ctx, a, rec)
		if err != nil {
			return nil, err
		}
		l.Why = why
	} else if rec.State != record.StateEnded {
		l.Why = wire.SkipBusy
	} else {
		l.Why = string(record.StateEnded)
	}
	l.Idle = l.Why == ""
	return l, nil
}

// sessionIndex is the session index, opened on first use: its bucket is
// created by an owner's topology, which may start after the ingress.
func (a *attached) sessionIndex(ctx context.Context, s *Server) (*kv.Index, error) {
	if x := a.index.Load(); x != nil {
		return x, nil
	}
	x, err := kv.OpenIndex(ctx, s.cfg.JS, s.cfg.Names)
	if err != nil {
		return nil, &Error{Err: ErrUnavailable, Detail: CodeIndexUnavailable,
			Message: "the session index is not available (an owner of this build creates its bucket): " + err.Error()}
	}
	a.index.Store(x)
	return x, nil
}

// CodeIndexUnavailable: the session index bucket does not exist yet (503).
const CodeIndexUnavailable = "index_unavailable"

// IndexRebuildReply answers POST /v1/admin/index/rebuild.
type IndexRebuildReply struct {
	RebuildID string `json:"rebuildId"`
}

func (s *Server) httpRebuildIndex(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) > 0 && strings.TrimSpace(string(b)) != "{}" {
		return bad("the rebuild takes no body (or {})")
	}
	id, err := s.RebuildIndex(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, IndexRebuildReply{RebuildID: id})
}

// RebuildIndex asks the owners to rebuild the session index: every owner
// process walks its share of the records and the index once, repairing
// every entry and posting (the baton_owner_index_reconciled_total
// metric's "rebuilt" counts the sessions, the owners' log says when each
// started and finished).
func (s *Server) RebuildIndex(ctx context.Context) (string, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return "", err
	}
	x, err := a.sessionIndex(ctx, s)
	if err != nil {
		return "", err
	}
	id := "rb-" + ulid.Make().String()
	if err := x.RequestRebuild(ctx, kv.IndexRebuild{RebuildID: id, RequestedAt: s.now(), By: adminCaller}); err != nil {
		return "", fail(ErrUnavailable, "request the rebuild: %v", err)
	}
	s.log.Info("session index rebuild requested", "rebuild", id)
	return id, nil
}

func (s *Server) httpStatusByAlias(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "alias" {
			return bad("unknown query parameter %q (allowed: alias)", clip(k))
		}
	}
	if len(q["alias"]) != 1 || q.Get("alias") == "" {
		return bad("give exactly one alias: GET /v1/sessions?alias=…")
	}
	st, err := s.StatusByAlias(r.Context(), q.Get("alias"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// StatusByAlias is the status of the session that holds alias: 404 when
// none does, 410 when its holder has ended.
func (s *Server) StatusByAlias(ctx context.Context, alias string) (Status, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return Status{}, err
	}
	req := &Request{Alias: alias}
	tok, err := subjects.EncodeToken(alias)
	if err != nil {
		return Status{}, bad("alias: %v", err)
	}
	h, err := a.hook(ctx, tok)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Status{}, notFound(req)
	case err != nil:
		return Status{}, fail(ErrUnavailable, "look up %s: %v", what(req), err)
	case h.Tombstone:
		return Status{}, fail(ErrGone, "session %s, which held the alias, has ended", h.SessionID)
	}
	st, err := s.Status(ctx, h.SessionID)
	if err == nil && st.State == string(record.StateEnded) {
		return Status{}, fail(ErrGone, "session %s, which held the alias, has ended", h.SessionID)
	}
	return st, err
}
