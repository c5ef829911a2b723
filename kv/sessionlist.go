package kv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// IndexQuery is what a listing of the session index filters by: every
// member set must match (Tags: each one).
type IndexQuery struct {
	Agent      string
	Deployment string
	State      string
	Parent     string
	Waiting    string // a durable wait kind, or "any"
	Tags       map[string]string
}

// Matches reports whether e matches every filter of q.
func (q IndexQuery) Matches(e record.IndexEntry) bool {
	if q.Agent != "" && e.Agent != q.Agent || q.Deployment != "" && e.DeploymentID != q.Deployment ||
		q.State != "" && string(e.State) != q.State || q.Parent != "" && e.ParentSessionID != q.Parent ||
		q.Waiting != "" && !e.Waiting(q.Waiting) {
		return false
	}
	for k, v := range q.Tags {
		if got, ok := e.Tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Driver is the dimension and value a listing of q walks: the most
// selective filter the key layout serves — parent, then a tag, the
// deployment with a wait, a wait, the deployment and state together, the
// state, the deployment, the agent — else every session. The other
// filters are applied to each entry the walk reads.
func (q IndexQuery) Driver() (dim, value string) {
	switch {
	case q.Parent != "":
		return subjects.DimParent, q.Parent
	case len(q.Tags) > 0:
		k := slices.Min(slices.Collect(maps.Keys(q.Tags)))
		return subjects.DimTag, subjects.TagValue(k, q.Tags[k])
	case q.Waiting != "" && q.Deployment != "":
		return subjects.DimDepWait, q.Deployment
	case q.Waiting != "":
		return subjects.DimWait, q.Waiting
	case q.State != "" && q.Deployment != "":
		return subjects.DimDepState, subjects.DepState(q.Deployment, q.State)
	case q.State != "":
		return subjects.DimState, q.State
	case q.Deployment != "":
		return subjects.DimDep, q.Deployment
	case q.Agent != "":
		return subjects.DimAgent, q.Agent
	}
	return subjects.DimAll, subjects.AllValue
}

// fingerprint ties a cursor to its query.
func (q IndexQuery) fingerprint() string {
	var b strings.Builder
	for _, s := range []string{q.Agent, q.Deployment, q.State, q.Parent, q.Waiting} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	for _, k := range slices.Sorted(maps.Keys(q.Tags)) {
		b.WriteString(k + "\x00" + q.Tags[k] + "\x00")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:6])
}

// ErrBadCursor is a listing cursor that is malformed or was issued for
// another query.
var ErrBadCursor = errors.New("kv: bad listing cursor")

// cursor is a position in a walk: the last posting examined, and how the
// walk reads the postings (by hour, or all at once).
type cursor struct {
	whole                bool
	hour, order, session string
}

// hourStart is the position before every posting of hour h.
func hourStart(h string) cursor { return cursor{hour: h, order: "0000000000000", session: "-"} }

func (q IndexQuery) encodeCursor(c cursor) string {
	mode := "h"
	if c.whole {
		mode = "a"
	}
	return base64.RawURLEncoding.EncodeToString([]byte("2|" + q.fingerprint() + "|" + mode + "|" + c.hour + "|" + c.order + "|" + c.session))
}

func (q IndexQuery) decodeCursor(s string) (cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 6 || parts[0] != "2" || parts[2] != "h" && parts[2] != "a" {
		return cursor{}, fmt.Errorf("%w: unknown format", ErrBadCursor)
	}
	if parts[1] != q.fingerprint() {
		return cursor{}, fmt.Errorf("%w: issued for other filters", ErrBadCursor)
	}
	p := subjects.Posting{Dim: "x", Value: "x", Hour: parts[3], Order: parts[4], SessionID: parts[5]}
	if _, err := subjects.ParsePosting(p.Key()); err != nil {
		return cursor{}, fmt.Errorf("%w: bad position", ErrBadCursor)
	}
	return cursor{whole: parts[2] == "a", hour: parts[3], order: parts[4], session: parts[5]}, nil
}

// CursorAt is the cursor of a walk of q that continues after the session
// created at createdAt with the ID sessionID (a page cut short): a walk
// by hour, which continues any walk.
func (q IndexQuery) CursorAt(sessionID string, createdAt time.Time) string {
	return q.encodeCursor(cursor{hour: subjects.IndexHour(createdAt), order: subjects.IndexOrder(createdAt), session: sessionID})
}

// before reports whether position c comes before posting p in a walk.
func (c cursor) before(p subjects.Posting) bool {
	if c.hour != p.Hour {
		return c.hour < p.Hour
	}
	if c.order != p.Order {
		return c.order < p.Order
	}
	return c.session < p.SessionID
}

// IndexPage is one page of a listing.
type IndexPage struct {
	Entries []record.IndexEntry
	// Next continues the walk ("" when it is done). A page may hold fewer
	// entries than asked and still have a Next: the walk stops after
	// reading a bounded number of postings.
	Next string
	// Scanned counts the postings the page examined; Hours the hour
	// listings it read.
	Scanned, Hours int
}

// ListBudget bounds the postings one page examines (at least this, or
// four times its limit) and the hours it lists. A walk over many hours
// whose value looks sparse — the densest of its three newest hours'
// postings times its hours at most ListWhole, judged on the first page —
// reads all its postings at once instead of an hour at a time (until a
// page finds more than twice ListWhole of them).
const (
	ListBudget     = 200
	ListHourBudget = 48
	ListWhole      = 2000
	listFetchers   = 16
)

// List is one page of the sessions matching q, newest first by creation
// time: it walks the postings of q's Driver an hour at a time from
// after's position (a Next of an earlier page for the same q; "" starts
// at the newest), reads the entry of each, and keeps those that match
// every filter of q, until limit entries or the page's budget. Order and
// position are a session's creation time and ID, which never change: a
// session that exists for the whole walk and matches throughout is listed
// exactly once.
func (x *Index) List(ctx context.Context, q IndexQuery, after string, limit int) (IndexPage, error) {
	var from cursor
	if after != "" {
		c, err := q.decodeCursor(after)
		if err != nil {
			return IndexPage{}, err
		}
		from = c
	}
	dim, value := q.Driver()
	hours := []string{"*"} // every hour at once
	if !from.whole {
		var err error
		if hours, err = x.hours(ctx, dim, value, from.hour); err != nil {
			return IndexPage{}, err
		}
		if after == "" && len(hours) > ListHourBudget/2 {
			// Sparse across many hours? The densest of its three newest
			// hours, times its hours, says.
			densest := 0
			for _, h := range hours[:3] {
				ps, err := x.postings(ctx, dim, value, h, from)
				if err != nil {
					return IndexPage{}, err
				}
				densest = max(densest, len(ps))
			}
			if densest*len(hours) <= ListWhole {
				from.whole, hours = true, []string{"*"}
			}
		}
	}
	budget := max(ListBudget, 4*limit)
	page := IndexPage{Entries: []record.IndexEntry{}}
	last := from
	for i, h := range hours {
		if page.Hours == ListHourBudget || page.Scanned >= budget {
			page.Next = q.encodeCursor(hourStart(h)) // every earlier hour is done
			return page, nil
		}
		page.Hours++
		ps, err := x.postings(ctx, dim, value, h, from)
		if err != nil {
			return IndexPage{}, err
		}
		if h == "*" && len(ps) > 2*ListWhole {
			from.whole = false // it grew dense: the next pages go by hour
		}
		for len(ps) > 0 {
			n := min(len(ps), budget-page.Scanned, 2*(limit-len(page.Entries))+8)
			if n <= 0 {
				page.Next = q.encodeCursor(last)
				return page, nil
			}
			entries, err := x.entries(ctx, ps[:n])
			if err != nil {
				return IndexPage{}, err
			}
			for j, e := range entries {
				page.Scanned++
				last = cursor{whole: from.whole, hour: ps[j].Hour, order: ps[j].Order, session: ps[j].SessionID}
				if e != nil && q.Matches(*e) && ps[j] == postingAt(*e, dim, value) {
					page.Entries = append(page.Entries, *e)
					if len(page.Entries) == limit {
						if j < len(entries)-1 || n < len(ps) || i < len(hours)-1 {
							page.Next = q.encodeCursor(last)
						}
						return page, nil
					}
				}
			}
			ps = ps[n:]
		}
	}
	return page, nil
}

// postingAt is the posting of dim's value an entry has (the one a walk
// must find it by: a posting left from an older creation time or value
// is stale).
func postingAt(e record.IndexEntry, dim, value string) subjects.Posting {
	return subjects.Posting{Dim: dim, Value: value, Hour: subjects.IndexHour(e.CreatedAt),
		Order: subjects.IndexOrder(e.CreatedAt), SessionID: e.SessionID}
}

// postings lists the postings of dim's value in one hour ("*": every
// hour) after position from, in walk order.
func (x *Index) postings(ctx context.Context, dim, value, hour string, from cursor) ([]subjects.Posting, error) {
	keys, err := x.keys(ctx, subjects.IndexPostings(dim, value, hour))
	if err != nil {
		return nil, err
	}
	out := make([]subjects.Posting, 0, len(keys))
	for _, k := range keys {
		p, err := subjects.ParsePosting(k)
		if err == nil && (from == cursor{} || from.before(p)) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b subjects.Posting) int {
		return strings.Compare(a.Hour+"."+a.Order+"."+a.SessionID, b.Hour+"."+b.Order+"."+b.SessionID)
	})
	return out, nil
}

// hours lists the hours that hold postings of dim's value, from hour from
// on ("" : all), newest first.
func (x *Index) hours(ctx context.Context, dim, value, from string) ([]string, error) {
	markers, err := x.keys(ctx, subjects.IndexMarkers(dim, value))
	if err != nil {
		return nil, err
	}
	hours := make([]string, 0, len(markers))
	for _, m := range markers {
		if _, _, h, err := subjects.ParseMarker(m); err == nil && h >= from {
			hours = append(hours, h)
		}
	}
	slices.Sort(hours)
	return hours, nil
}

// entries reads the entry of each posting, concurrently; a missing entry
// is nil.
func (x *Index) entries(ctx context.Context, ps []subjects.Posting) ([]*record.IndexEntry, error) {
	out := make([]*record.IndexEntry, len(ps))
	errs := make([]error, len(ps))
	sem := make(chan struct{}, listFetchers)
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			e, _, err := x.Get(ctx, p.SessionID)
			switch {
			case errors.Is(err, record.ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				out[i] = &e
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
