package ingress

import (
	"context"
	"encoding/json"
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
	query    kv.IndexQuery
}

// Bounded is the list encoded in at most max bytes: sessions are cut from
// the end, and next then continues after the last one kept.
func (l SessionList) Bounded(max int) ([]byte, error) {
	for {
		b, err := json.Marshal(l)
		if err != nil || len(b) <= max || len(l.Sessions) <= 1 {
			return b, err
		}
		l.Sessions = l.Sessions[:len(l.Sessions)-1]
		last := l.Sessions[len(l.Sessions)-1]
		l.Next = l.query.CursorAt(last.SessionID, last.CreatedAt)
	}
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
	// Storage is what it keeps in the streams and the object store, as
	// the index last counted it (a hint; absent until counted).
	Storage *record.Storage `json:"storage,omitempty"`
}

var listKeys = []string{"agent", "deployment", "state", "tag", "waiting", "parent", "limit", "cursor"}

func (s *Server) sessionRoutes(mux *http.ServeMux) {
	s.route(mux, "GET /v1/admin/sessions", s.admin(s.httpListSessions))
	s.route(mux, "POST /v1/admin/index/rebuild", s.admin(s.httpRebuildIndex))
	s.route(mux, "GET /v1/sessions", s.user(s.httpStatusByAlias))
}

// parseListQuery reads a listing's filters, limit and cursor from a URL
// query.
func parseListQuery(r *http.Request) (ListRequest, error) {
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(listKeys, k) {
			return ListRequest{}, bad("unknown query parameter %q (allowed: %s)", clip(k), strings.Join(listKeys, ", "))
		}
		if k != "tag" && len(vs) > 1 {
			return ListRequest{}, bad("query parameter %q given %d times", k, len(vs))
		}
	}
	lr := ListRequest{Agent: q.Get("agent"), Deployment: q.Get("deployment"), State: q.Get("state"),
		Waiting: q.Get("waiting"), Parent: q.Get("parent"), Cursor: q.Get("cursor")}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			return ListRequest{}, bad("tag %q: want key:value", clip(t))
		}
		if lr.Tags == nil {
			lr.Tags = map[string]string{}
		}
		if prev, dup := lr.Tags[k]; dup && prev != v {
			return ListRequest{}, bad("tag %q given twice with different values", clip(k))
		}
		lr.Tags[k] = v
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			return ListRequest{}, bad("limit %q: want an integer from 1 to %d", clip(q.Get("limit")), MaxListLimit)
		}
		lr.Limit = n
	} else {
		lr.Limit = DefaultListLimit
	}
	return lr, lr.check()
}

// ListRequest is a listing's filters, page size and cursor: the query of
// GET /v1/admin/sessions, the body of the NATS admin request.
type ListRequest struct {
	Agent      string            `json:"agent,omitempty"`
	Deployment string            `json:"deployment,omitempty"`
	State      string            `json:"state,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Waiting    string            `json:"waiting,omitempty"`
	Parent     string            `json:"parent,omitempty"`
	Limit      int               `json:"limit,omitempty"` // 0: DefaultListLimit
	Cursor     string            `json:"cursor,omitempty"`
}

var listRequestKeys = []string{"agent", "deployment", "state", "tags", "waiting", "parent", "limit", "cursor"}

// ParseListRequest parses the body of a NATS listing request (empty: {}).
func ParseListRequest(b []byte) (ListRequest, error) {
	var lr ListRequest
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := decodeStrict(b, &lr, listRequestKeys); err != nil {
			return ListRequest{}, bad("%v", err)
		}
	}
	if lr.Limit == 0 {
		lr.Limit = DefaultListLimit
	}
	return lr, lr.check()
}

// check validates every filter and the limit.
func (lr ListRequest) check() error {
	switch {
	case lr.Agent != "" && subjects.ValidateAgent(lr.Agent) != nil:
		return bad("agent %q: want [a-z0-9][a-z0-9_-]{0,63}", clip(lr.Agent))
	case lr.Deployment != "" && subjects.ValidateDeployment(lr.Deployment) != nil:
		return invalidDeployment(lr.Deployment, subjects.ValidateDeployment(lr.Deployment))
	case lr.State != "" && !record.State(lr.State).Valid():
		return bad("state %q: want active, handoff, hibernated, paused, ended or quarantined", clip(lr.State))
	case lr.Waiting != "" && !slices.Contains(waitFilters, lr.Waiting):
		return bad("waiting %q: want %s", clip(lr.Waiting), strings.Join(waitFilters, ", "))
	case lr.Parent != "" && subjects.ValidateSessionID(lr.Parent) != nil:
		return bad("parent %q: not a session ID", clip(lr.Parent))
	case lr.Limit < 1 || lr.Limit > MaxListLimit:
		return bad("limit %d: want an integer from 1 to %d", lr.Limit, MaxListLimit)
	}
	for k, v := range lr.Tags {
		if !tagKeyRE.MatchString(k) || len(v) > MaxTagValueBytes {
			return bad("tag %q: the key must match [a-z0-9_.-]{1,64}, the value be at most %d bytes", clip(k), MaxTagValueBytes)
		}
	}
	return nil
}

// query is the index query of the request's filters.
func (lr ListRequest) query() kv.IndexQuery {
	return kv.IndexQuery{Agent: lr.Agent, Deployment: lr.Deployment, State: lr.State, Parent: lr.Parent,
		Waiting: lr.Waiting, Tags: lr.Tags}
}

func (s *Server) httpListSessions(w http.ResponseWriter, r *http.Request) error {
	lr, err := parseListQuery(r)
	if err != nil {
		return err
	}
	list, err := s.ListSessions(r.Context(), lr)
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
func (s *Server) ListSessions(ctx context.Context, lr ListRequest) (SessionList, error) {
	if err := lr.check(); err != nil {
		return SessionList{}, err
	}
	q := lr.query()
	a, err := s.topology(ctx)
	if err != nil {
		return SessionList{}, err
	}
	x, err := a.sessionIndex(ctx, s)
	if err != nil {
		return SessionList{}, err
	}
	page, err := x.List(ctx, q, lr.Cursor, lr.Limit)
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
	out.query = q
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
		WaitingFor: record.WaitingFor(rec, cp), EventSeq: rec.EventSeq(cp.EventSeq), Usage: cp.Usage, LastActivityAt: rec.UpdatedAt,
		Storage: e.Storage}
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
