package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// Events over NATS: a channel service that has no HTTP reads a session's
// events by paging (the events operation), long-polling for the next one
// with wait. A page is bounded in bytes; message.output content above
// NATSInlineOutput comes as its ref, read with the blob operation. To
// follow a session live, a client subscribes to the session's event
// subject (core NATS: the stored messages reach it, no consumer is made)
// and pages from its last seen seq to fill gaps; the pages are the truth
// and a client deduplicates by seq (docs/api.md, "Events over NATS").

// Limits of the events operation.
const (
	// MaxEventsLimit is the largest limit of one events request;
	// DefaultEventsLimit the limit when none is given.
	MaxEventsLimit     = 500
	DefaultEventsLimit = 100
	// MaxEventsWait is the longest wait of one events request.
	MaxEventsWait = 30 * time.Second
	// MaxEventsReplyBytes bounds an events or blob reply (less when the
	// server's maximum payload is smaller).
	MaxEventsReplyBytes = 512 << 10
	// NATSInlineOutput is the largest out-of-line message.output (or
	// task result) content an events page carries inline; larger content
	// comes as its ref.
	NATSInlineOutput = 64 << 10
	// eventsPoll is how often a waiting request looks again without a
	// notice on the event subject (a notice can come before the stream
	// serves the event).
	eventsPoll = time.Second
)

// EventsRequest is the NATS events operation's body: {"sessionId"|"alias",
// "after","limit","wait"}.
type EventsRequest struct {
	SessionID string
	Alias     string
	After     uint64        // the seq the page starts after
	Limit     int           // at most this many events (1..MaxEventsLimit)
	Wait      time.Duration // long-poll this long for an event after After
}

// EventPage answers an events request: the envelopes (as stored, a
// message.output's content up to NATSInlineOutput inlined), Next the after
// of the next page (the last event's seq, else the request's after), and
// Ended when the session has ended and the page reaches its last event:
// nothing more will come.
type EventPage struct {
	SessionID string            `json:"sessionId"`
	Events    []json.RawMessage `json:"events"`
	Next      uint64            `json:"next"`
	Ended     bool              `json:"ended"`
}

var eventsKeys = []string{"sessionId", "alias", "after", "limit", "wait"}

// ParseEventsRequest parses the events body: exactly one of sessionId and
// alias; after ≥ 0; limit 1..MaxEventsLimit (default
// DefaultEventsLimit); wait a Go duration 0..MaxEventsWait.
func ParseEventsRequest(b []byte) (EventsRequest, error) {
	var v struct {
		SessionID *string `json:"sessionId"`
		Alias     *string `json:"alias"`
		After     *uint64 `json:"after"`
		Limit     *int    `json:"limit"`
		Wait      *string `json:"wait"`
	}
	if err := decodeStrict(b, &v, eventsKeys); err != nil {
		return EventsRequest{}, bad("%v", err)
	}
	r := EventsRequest{Limit: DefaultEventsLimit}
	var err error
	if r.SessionID, r.Alias, err = oneAddress(v.SessionID, v.Alias); err != nil {
		return EventsRequest{}, err
	}
	if v.After != nil {
		r.After = *v.After
	}
	if v.Limit != nil {
		if *v.Limit < 1 || *v.Limit > MaxEventsLimit {
			return EventsRequest{}, bad("limit %d: want 1..%d", *v.Limit, MaxEventsLimit)
		}
		r.Limit = *v.Limit
	}
	if v.Wait != nil {
		d, err := time.ParseDuration(*v.Wait)
		if err != nil || d < 0 || d > MaxEventsWait {
			return EventsRequest{}, bad("wait %q: want a duration from 0s to %s", clip(*v.Wait), MaxEventsWait)
		}
		r.Wait = d
	}
	return r, nil
}

// oneAddress takes exactly one of a session ID and an alias (the NATS
// events and status bodies), each checked.
func oneAddress(id, alias *string) (sessionID, aliasOut string, err error) {
	switch {
	case (id == nil) == (alias == nil):
		return "", "", bad("give exactly one of sessionId and alias")
	case id != nil:
		return *id, "", checkSessionID(*id)
	}
	return "", *alias, checkAlias(*alias)
}

// errPageFull stops a page read.
var errPageFull = errors.New("ingress: page full")

// Events answers the NATS events operation: the committed events of the
// session (by ID, or the session that holds the alias — also an ended one,
// whose events stay readable) with seq > After, at most Limit of them and
// at most the reply bound in bytes. With Wait, a request that finds none
// waits until one exists, the wait is over or the session has ended. An
// unknown session is 404, a deleted one 410 deleted.
func (s *Server) Events(ctx context.Context, req EventsRequest) (EventPage, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return EventPage{}, err
	}
	id, err := s.eventsSession(ctx, a, req)
	if err != nil {
		return EventPage{}, err
	}
	var sub *nats.Subscription
	notes := make(chan struct{}, 1)
	defer func() {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}()
	deadline := time.Now().Add(req.Wait)
	for {
		page, err := s.eventPage(ctx, a, id, req)
		if err != nil || len(page.Events) > 0 || page.Ended || !time.Now().Before(deadline) {
			return page, err
		}
		if sub == nil {
			// Subscribe, then read again: an event committed in between is
			// read, a later one noticed.
			if sub, err = s.cfg.NC.Subscribe(s.cfg.Names.Events(id), func(*nats.Msg) { notice(notes) }); err != nil {
				return EventPage{}, fail(ErrUnavailable, "watch session %s: %v", id, err)
			}
			continue
		}
		if err := waitNotice(ctx, notes, min(eventsPoll, time.Until(deadline))); err != nil {
			return page, nil // the requester is gone or the server stops: the empty page
		}
	}
}

// notice records that a message came (at most one is kept: never a slow
// consumer).
func notice(notes chan<- struct{}) {
	select {
	case notes <- struct{}{}:
	default:
	}
}

// waitNotice waits for a notice or for d.
func waitNotice(ctx context.Context, notes <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-notes:
	case <-t.C:
	}
	return nil
}

// eventsSession resolves the request's session ID and checks the session
// exists and is not deleted.
func (s *Server) eventsSession(ctx context.Context, a *attached, req EventsRequest) (string, error) {
	id := req.SessionID
	if req.Alias != "" {
		tok, err := subjects.EncodeToken(req.Alias)
		if err != nil {
			return "", bad("alias: %v", err)
		}
		h, err := a.hook(ctx, tok)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return "", notFound(&Request{Alias: req.Alias})
		case err != nil:
			return "", fail(ErrUnavailable, "look up alias %q: %v", clip(req.Alias), err)
		}
		id = h.SessionID
	}
	return id, nil
}

// eventPage reads one page: the record first (ended, deleted), then the
// events after req.After.
func (s *Server) eventPage(ctx context.Context, a *attached, id string, req EventsRequest) (EventPage, error) {
	cur, err := a.liveRecord(ctx, id)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{SessionID: id, Events: []json.RawMessage{}, Next: req.After}
	bound := s.replyBound(MaxEventsReplyBytes) - 256 // the page's own members
	size := 0
	rd := &reader{stream: a.events, subject: s.cfg.Names.Events(id)}
	v := view{refs: a.refs, sessionID: id, inlineMax: NATSInlineOutput}
	err = rd.readRetry(ctx, req.After+1, 0, func(ev event) error {
		if len(page.Events) >= req.Limit {
			return errPageFull
		}
		if ev.kind == "" { // an envelope that does not validate: stepped over
			page.Next = ev.seq
			return nil
		}
		b := v.envelope(ctx, ev)
		if size+len(b)+1 > bound && len(page.Events) == 0 {
			b = ev.data // the first event, its content as its ref
		}
		if size+len(b)+1 > bound {
			if len(page.Events) == 0 {
				return fmt.Errorf("event %d of session %s is %d bytes, over the reply bound %d", ev.seq, id, len(b), bound)
			}
			return errPageFull
		}
		size += len(b) + 1
		page.Events, page.Next = append(page.Events, b), ev.seq
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return EventPage{}, fail(ErrUnavailable, "read the events of session %s: %v", id, err)
	}
	page.Ended = endedBefore(cur.Record, page.Next)
	return page, nil
}
