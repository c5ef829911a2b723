package ingress

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// DrainReport answers GET /v1/admin/deployments: one page of sessions, by
// deployment. Counts are of this page; sum the pages for totals.
type DrainReport struct {
	Deployments []DeploymentReport `json:"deployments"`
	Scanned     int                `json:"scanned"`        // sessions read for this page
	Next        string             `json:"next,omitempty"` // pass as ?after= for the next page; absent on the last
}

// DeploymentReport is one deployment in the drain report.
type DeploymentReport struct {
	DeploymentID string          `json:"deploymentId"`
	Retired      bool            `json:"retired"`
	RetiredAt    *time.Time      `json:"retiredAt,omitempty"`
	Sessions     map[string]int  `json:"sessions"` // by state: active, handoff, hibernated, paused, ended, quarantined
	Idle         int             `json:"idle"`
	NotIdle      []SessionReport `json:"notIdle"`
}

// SessionReport is a session of the drain report that is not idle.
// ParentSessionID is set for a child session (its checkpoint's parent);
// Children, for a parent, are its children's session IDs: those of its
// handles that are not closed, then those of its descendants' outstanding
// waits (a session not idle because of them has why "child").
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
	after := q.Get("after")
	if after != "" {
		if err := checkSessionID(after); err != nil {
			return err
		}
	}
	rep, err := s.DrainReport(r.Context(), after, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rep)
}

// DrainReport reads up to limit session records with IDs after after (in ID
// order) and reports them by deployment: counts by state and, for each
// session that is not idle, why (the rule of GET /v1/sessions/{id}'s idle,
// with the inbox checked for at most one unapplied command). Every
// deployment record is listed, with its retirement, even without sessions.
// Records are direct gets (hints); a session created or deleted during the
// listing may be missed or reported as gone.
func (s *Server) DrainReport(ctx context.Context, after string, limit int) (DrainReport, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return DrainReport{}, err
	}
	ids, err := a.store.ListSessions(ctx)
	if err != nil {
		return DrainReport{}, fail(ErrUnavailable, "list sessions: %v", err)
	}
	deps, err := a.store.ListDeployments(ctx)
	if err != nil {
		return DrainReport{}, fail(ErrUnavailable, "list deployments: %v", err)
	}
	page, next := reportPage(ids, after, limit)
	t := reportTally{}
	t.addDeployments(deps)
	scanned := 0
	for _, id := range page {
		cur, err := a.store.GetSession(ctx, id)
		if errors.Is(err, record.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return DrainReport{}, fail(ErrUnavailable, "read session %s: %v", id, err)
		}
		scanned++
		if err := s.reportSession(ctx, a, t.deployment(cur.Record.DeploymentID), id, cur.Record); err != nil {
			return DrainReport{}, err
		}
	}
	return DrainReport{Deployments: t.sorted(), Scanned: scanned, Next: next}, nil
}

// reportPage is the page of ids (sorted) after after, at most limit long,
// and the after of the next page ("" on the last).
func reportPage(ids []string, after string, limit int) (page []string, next string) {
	i, _ := slices.BinarySearch(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	page = ids[i:]
	if len(page) > limit {
		page = page[:limit]
		next = page[len(page)-1]
	}
	return page, next
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

// reportSession counts the record of session id in its deployment's report
// d: by state, then, unless it has ended, as idle or as not idle and why.
func (s *Server) reportSession(ctx context.Context, a *attached, d *DeploymentReport, id string, rec record.SessionRecord) error {
	d.Sessions[string(rec.State)]++
	if rec.State == record.StateEnded {
		return nil
	}
	sr := SessionReport{SessionID: id, State: string(rec.State), OwnerProcess: rec.OwnerProcess, Epoch: rec.Epoch}
	if rec.Quarantined() {
		sr.Why, sr.OwnerProcess = string(record.StateQuarantined), ""
		d.NotIdle = append(d.NotIdle, sr)
		return nil
	}
	why, cp, err := s.notIdle(ctx, a, rec)
	if err != nil {
		return fail(ErrUnavailable, "session %s: inbox: %v", id, err)
	}
	if why == "" {
		d.Idle++
		return nil
	}
	sr.Why = why
	if cp != nil {
		sr.ParentSessionID, sr.Children = kin(cp)
	}
	d.NotIdle = append(d.NotIdle, sr)
	return nil
}

// kin is a checkpoint's parent session ("" for a root) and children: the
// child sessions of its handles that are not closed, then those of its
// descendants' outstanding waits, each once.
func kin(cp *wire.Checkpoint) (parent string, children []string) {
	if cp.Parent != nil {
		parent = cp.Parent.SessionID
	}
	add := func(id string) {
		if id != "" && !slices.Contains(children, id) {
			children = append(children, id)
		}
	}
	for _, h := range cp.Handles {
		if h.State != wire.HandleClosed {
			add(h.ChildSessionID)
		}
	}
	for _, w := range cp.ChildWaits {
		add(w.ChildSessionID)
	}
	return parent, children
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
