package session

import (
	"context"
	"errors"
	"sync"

	"github.com/baton-rt/baton/runtime"
)

// Pending child sends (docs/driver.md "Child sends"). A send that creates
// a child on a deployment with no live owner does not hold up the session
// loop: Sends.Send hands it back, the machine keeps it (pendingSends), and
// one goroutine per pending send retries it (Sends.SendPending) until it
// leaves — fed back as runtime.SendsLeft — or until its deadline, the
// durable start plus Env.ChildSendTimeout, has passed: the host then
// publishes the failed child.result to this session's own inbox, which
// the machine applies once like any child result. The goroutines follow
// the machine's pendingSends after every input (reconcileSends): a send
// the machine dropped (cancelled, closed) is stopped; a session that
// stops stops them all, and the next run starts them again from the
// checkpoint, with the same deadlines.

// sender is one pending send's goroutine.
type sender struct {
	cancel context.CancelFunc
	done   bool // it returned: left (fed back) or expired (failure published)
}

// sendResult is what a sender reports to the session loop.
type sendResult struct {
	id   string
	left bool
}

// senders are the goroutines of the pending sends, by command ID, and
// their reports (sent). Only the session loop uses the map.
type senders struct {
	m    map[string]*sender
	sent chan sendResult
	wg   sync.WaitGroup
}

func newSenders() senders {
	return senders{m: map[string]*sender{}, sent: make(chan sendResult)}
}

func (ss *senders) len() int { return len(ss.m) }

// start runs send for the pending send id in its own goroutine; its report
// goes to sent unless it is stopped first.
func (ss *senders) start(ctx context.Context, id string, send func(context.Context) (left bool)) {
	sctx, cancel := context.WithCancel(ctx)
	ss.m[id] = &sender{cancel: cancel}
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		left := send(sctx)
		if sctx.Err() != nil {
			return
		}
		select {
		case ss.sent <- sendResult{id: id, left: left}:
		case <-sctx.Done():
		}
	}()
}

// keep stops every sender whose ID keep does not hold.
func (ss *senders) keep(keep map[string]bool) {
	for id, sd := range ss.m {
		if !keep[id] {
			sd.cancel()
			delete(ss.m, id)
		}
	}
}

// reported marks sender id as returned.
func (ss *senders) reported(id string) {
	if sd, ok := ss.m[id]; ok {
		sd.done = true
	}
}

// stopAll stops every sender and waits for them.
func (ss *senders) stopAll() {
	for id, sd := range ss.m {
		sd.cancel()
		delete(ss.m, id)
	}
	ss.wg.Wait()
}

// reconcileSends starts a sender for each pending send without one and
// stops those the machine no longer holds.
func (s *Session) reconcileSends(ctx context.Context) {
	if s.stopped && s.senders.len() == 0 {
		return
	}
	pending := s.m.PendingSends()
	keep := make(map[string]bool, len(pending))
	for _, p := range pending {
		id := p.Send.Command.ID
		keep[id] = true
		if _, ok := s.senders.m[id]; !ok && !s.stopped {
			s.senders.start(ctx, id, func(ctx context.Context) bool { return s.sendPending(ctx, p) })
		}
	}
	s.senders.keep(keep)
}

// sendPending retries pending send p until it leaves (true), expires (its
// failure is published) or ctx ends.
func (s *Session) sendPending(ctx context.Context, p runtime.PendingSend) bool {
	err := s.env.Sends.SendPending(ctx, s.id, p, p.Since.Add(s.env.ChildSendTimeout))
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrSendExpired) {
		s.log.Warn("pending child send stopped", "to", p.Send.SessionID, "command", p.Send.Command.ID, "err", err)
	}
	return err == nil
}

// sendDone handles a sender's report: a send that left is dropped from
// the checkpoint; an expired one waits for its failure to be applied.
func (s *Session) sendDone(ctx context.Context, r sendResult) error {
	s.senders.reported(r.id)
	if !r.left {
		return nil
	}
	return s.handle(ctx, runtime.SendsLeft{IDs: []string{r.id}})
}
