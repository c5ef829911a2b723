package ingress

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// DrainReport answers GET /v1/admin/deployments: every deployment the
// fleet knows, its counts by state (totals, from the session index), and
// one page of its sessions that are not idle.
type DrainReport struct {
	Deployments []DeploymentReport `json:"deployments"`
	Scanned     int                `json:"scanned"`        // index entries read for this page
	Next        string             `json:"next,omitempty"` // pass as ?after= for the next page; absent on the last
}

// DeploymentReport is one deployment in the drain report.
type DeploymentReport struct {
	DeploymentID string     `json:"deploymentId"`
	Agent        string     `json:"agent"`
	Retired      bool       `json:"retired"`
	RetiredAt    *time.Time `json:"retiredAt,omitempty"`
	// Promoted: the deployment its agent's ingresses stamp.
	Promoted bool `json:"promoted"`
	// Owners are its live owner processes and their leases' expiry.
	Owners []kv.OwnerView `json:"owners"`
	// InboxVersions and StateVersions are what its owners advertised
	// (empty for a build from before the advertisement: inbox 1).
	InboxVersions []int `json:"inboxVersions"`
	StateVersions []int `json:"stateVersions"`
	// Sessions counts its sessions by state: totals, from the index.
	Sessions map[string]int `json:"sessions"`
	// Idle counts the active sessions this page read and found idle
	// (hibernated ones are idle unless they wait: they are counted in
	// Sessions, not read); NotIdle lists those it found not idle.
	Idle    int             `json:"idle"`
	NotIdle []SessionReport `json:"notIdle"`
}

// SessionReport is a session of the drain report that is not idle.
// ParentSessionID is set for a child session; Children, for a parent, are
// the child sessions it waits for (its active handles' children, then its
// descendants' that wait).
type SessionReport struct {
	SessionID       string   `json:"sessionId"`
	State           string   `json:"state"`
	Why             string   `json:"why"` // busy, paused, input, authorization, task, child, queued, quarantined
	OwnerProcess    string   `json:"ownerProcess,omitempty"`
	Epoch           uint64   `json:"epoch"`
	ParentSessionID string   `json:"parentSessionId,omitempty"`
	Children        []string `json:"children,omitempty"`
}

func (s *Server) httpDrainReport(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "limit" && k != "after" {
			return bad("unknown query parameter %q (allowed: limit, after)", clip(k))
		}
	}
	limit := DefaultReportLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxReportLimit {
			return bad("limit %q: want an integer from 1 to %d", clip(v), MaxReportLimit)
		}
		limit = n
	}
	rep, err := s.DrainReport(r.Context(), q.Get("after"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rep)
}

// The stages of a deployment's walk for its sessions that are not idle:
// those with a durable wait (any state), then those mid-handoff,
// quarantined, paused, and active (the only ones whose record is read:
// a live turn or a queued command keeps them busy) — each session once.
var reportStages = []kv.IndexQuery{
	{Waiting: "any"},
	{State: string(record.StateHandoff)}, {State: string(record.StateQuarantined)},
	{State: string(record.StatePaused)}, {State: string(record.StateActive)},
}

// reportCursor is where a drain report page continues: a deployment, a
// stage of its walk, and the index's cursor in it.
type reportCursor struct {
	Deployment string `json:"d"`
	Stage      int    `json:"s"`
	Index      string `json:"c,omitempty"`
}

func decodeReportCursor(after string) (reportCursor, error) {
	var c reportCursor
	if after == "" {
		return c, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil || json.Unmarshal(raw, &c) != nil || c.Stage < 0 || c.Stage >= len(reportStages) ||
		subjects.ValidateDeployment(c.Deployment) != nil {
		return reportCursor{}, bad("after %q: not the next of a drain report page", clip(after))
	}
	return c, nil
}

func (c reportCursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DrainReport lists every deployment the fleet knows (an agent key, a
// record, a live owner or a session in the index) with its agent, retirement, promotion, live
// owners and advertised versions, counts its sessions by state from the
// session index (a count per state, answered by the server from the
// index's subject state: no entry is read), and walks its sessions that
// may not be idle (reportStages), reading at most limit index entries per
// page, from after (the previous page's next). Records are read only for
// active sessions without a durable wait (busy or queued, else idle).
func (s *Server) DrainReport(ctx context.Context, after string, limit int) (DrainReport, error) {
	from, err := decodeReportCursor(after)
	if err != nil {
		return DrainReport{}, err
	}
	a, err := s.topology(ctx)
	if err != nil {
		return DrainReport{}, err
	}
	x, err := a.sessionIndex(ctx, s)
	if err != nil {
		return DrainReport{}, err
	}
	deps, err := a.store.ListDeployments(ctx)
	if err != nil {
		return DrainReport{}, fail(ErrUnavailable, "list deployments: %v", err)
	}
	t := reportTally{}
	t.addDeployments(deps)
	for _, d := range a.fleet.DeploymentIDs() {
		t.deployment(d)
	}
	indexed, err := x.Values(ctx, subjects.DimDep)
	if err != nil {
		return DrainReport{}, fail(ErrUnavailable, "list the index's deployments: %v", err)
	}
	for _, d := range indexed {
		t.deployment(d)
	}
	if err := s.describe(ctx, a, x, t); err != nil {
		return DrainReport{}, err
	}
	rep := DrainReport{}
	for _, d := range t.sorted() {
		if d.DeploymentID < from.Deployment {
			continue
		}
		stage, cur := 0, ""
		if d.DeploymentID == from.Deployment {
			stage, cur = from.Stage, from.Index
		}
		for ; stage < len(reportStages); stage, cur = stage+1, "" {
			if rep.Scanned >= limit {
				rep.Next = reportCursor{Deployment: d.DeploymentID, Stage: stage, Index: cur}.encode()
				rep.Deployments = t.sorted()
				return rep, nil
			}
			next, err := s.walkStage(ctx, a, x, t[d.DeploymentID], stage, cur, limit-rep.Scanned, &rep.Scanned)
			if err != nil {
				return DrainReport{}, err
			}
			if next != "" {
				rep.Next = reportCursor{Deployment: d.DeploymentID, Stage: stage, Index: next}.encode()
				rep.Deployments = t.sorted()
				return rep, nil
			}
		}
	}
	rep.Deployments = t.sorted()
	return rep, nil
}

// describe fills each deployment's agent, promotion, owners, versions and
// counts by state.
func (s *Server) describe(ctx context.Context, a *attached, x *kv.Index, t reportTally) error {
	var ids []string
	for id, d := range t {
		ids = append(ids, id)
		d.Agent = a.fleet.KnownAgent(id)
		p, _, ok := a.fleet.Promoted(d.Agent)
		d.Promoted = ok && p == id
		d.Owners = a.fleet.Owners(id)
		d.InboxVersions, d.StateVersions = a.fleet.Versions(id)
		if d.InboxVersions == nil {
			d.InboxVersions = []int{}
		}
		if d.StateVersions == nil {
			d.StateVersions = []int{}
		}
	}
	counts, err := countStates(ctx, x, ids)
	if err != nil {
		return err
	}
	for id, d := range t {
		d.Sessions = counts[id]
	}
	return nil
}

// zeroStates is a count of every state, at zero.
func zeroStates() map[string]int {
	m := make(map[string]int, len(reportStates))
	for _, st := range reportStates {
		m[string(st)] = 0
	}
	return m
}

// countStates counts each deployment's sessions by state from the session
// index (kv.Index.Count of each deployment and state: answered by the
// server from the index's subject state, no entry read), a few at a time.
func countStates(ctx context.Context, x *kv.Index, deps []string) (map[string]map[string]int, error) {
	type count struct {
		dep, state string
		n          int
		err        error
	}
	var counts []*count
	for _, d := range deps {
		for _, st := range reportStates {
			counts = append(counts, &count{dep: d, state: string(st)})
		}
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, c := range counts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.n, c.err = x.Count(ctx, subjects.DimDepState, subjects.DepState(c.dep, c.state))
		})
	}
	wg.Wait()
	out := map[string]map[string]int{}
	for _, d := range deps {
		out[d] = zeroStates()
	}
	for _, c := range counts {
		if c.err != nil {
			return nil, fail(ErrUnavailable, "count sessions: %v", c.err)
		}
		out[c.dep][c.state] = c.n
	}
	return out, nil
}

// walkStage walks one stage of deployment d's sessions from cursor cur,
// reading at most budget entries (counted in scanned); it returns the
// cursor to continue from ("" when the stage is done).
func (s *Server) walkStage(ctx context.Context, a *attached, x *kv.Index, d *DeploymentReport, stage int, cur string, budget int, scanned *int) (string, error) {
	q := reportStages[stage]
	q.Deployment = d.DeploymentID
	for {
		if budget <= 0 {
			return cur, nil
		}
		page, err := x.List(ctx, q, cur, min(budget, MaxListLimit))
		if err != nil {
			return "", fail(ErrUnavailable, "walk the session index: %v", err)
		}
		*scanned += page.Scanned
		budget -= page.Scanned
		for _, e := range page.Entries {
			if stage > 0 && len(e.WaitingFor) > 0 {
				continue // listed by the first stage
			}
			if err := s.reportEntry(ctx, a, d, e); err != nil {
				return "", err
			}
		}
		if page.Next == "" {
			return "", nil
		}
		cur = page.Next
		if page.Scanned == 0 {
			return cur, nil
		}
	}
}

// reportEntry counts entry e as idle or lists it as not idle, with why:
// the entry's state and durable waits, and for an active session without
// one, its record and inbox.
func (s *Server) reportEntry(ctx context.Context, a *attached, d *DeploymentReport, e record.IndexEntry) error {
	sr := SessionReport{SessionID: e.SessionID, State: string(e.State), OwnerProcess: e.OwnerProcess, Epoch: e.Epoch,
		ParentSessionID: e.ParentSessionID}
	for _, w := range e.WaitingFor {
		if w.Kind == record.WaitChild {
			sr.Children = append(sr.Children, w.SessionID)
		}
	}
	sr.Why = record.NotIdle(e.Activity()) // the idle rule, as far as the index knows
	switch {
	case e.State == record.StateEnded:
		return nil
	case e.State == record.StateQuarantined:
		sr.OwnerProcess = ""
	case sr.Why == "" && e.State == record.StateActive: // a live turn or a queued command?
		cur, err := a.store.GetSession(ctx, e.SessionID)
		if errors.Is(err, record.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fail(ErrUnavailable, "read session %s: %v", e.SessionID, err)
		}
		why, _, err := s.notIdle(ctx, a, cur.Record)
		if err != nil {
			return fail(ErrUnavailable, "session %s: inbox: %v", e.SessionID, err)
		}
		sr.Why, sr.OwnerProcess = why, cur.Record.OwnerProcess
	}
	if sr.Why == "" {
		d.Idle++
		return nil
	}
	d.NotIdle = append(d.NotIdle, sr)
	return nil
}

// reportTally is the drain report being built, by deployment ID.
type reportTally map[string]*DeploymentReport

// reportStates are the states every deployment's counts name, zero or not.
var reportStates = []record.State{record.StateActive, record.StateHandoff, record.StateHibernated,
	record.StatePaused, record.StateEnded, record.StateQuarantined}

// deployment returns dep's report, adding it with every count at zero.
func (t reportTally) deployment(dep string) *DeploymentReport {
	d := t[dep]
	if d == nil {
		d = &DeploymentReport{DeploymentID: dep, NotIdle: []SessionReport{}, Sessions: map[string]int{}}
		for _, st := range reportStates {
			d.Sessions[string(st)] = 0
		}
		t[dep] = d
	}
	return d
}

// addDeployments lists every deployment record, with its retirement.
func (t reportTally) addDeployments(deps []kv.Deployment) {
	for _, d := range deps {
		r := t.deployment(d.ID)
		r.Retired = d.Retired
		if d.Retired && !d.RetiredAt.IsZero() {
			at := d.RetiredAt
			r.RetiredAt = &at
		}
	}
}

// sorted is the reports in deployment ID order.
func (t reportTally) sorted() []DeploymentReport {
	out := make([]DeploymentReport, 0, len(t))
	for _, d := range t {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(x, y DeploymentReport) int { return strings.Compare(x.DeploymentID, y.DeploymentID) })
	return out
}

// notIdle is why a live session is not idle, "" when it is, and its
// checkpoint (nil when unreadable): busy when its checkpoint is
// unreadable, else record.NotIdle of its checkpoint's activity (child for
// an active handle or a descendant's wait), the inbox read (for one
// unapplied command) only when nothing else keeps it busy.
func (s *Server) notIdle(ctx context.Context, a *attached, rec record.SessionRecord) (string, *wire.Checkpoint, error) {
	cp, err := wire.DecodeCheckpoint(rec.Checkpoint)
	if err != nil {
		return wire.SkipBusy, nil, nil
	}
	if why := record.NotIdle(record.CheckpointActivity(rec, cp, false)); why != "" {
		return why, &cp, nil
	}
	q, err := s.queueDepthUpTo(ctx, a, cp, 1)
	if err != nil {
		return "", nil, err
	}
	return record.NotIdle(record.CheckpointActivity(rec, cp, q > 0)), &cp, nil
}
