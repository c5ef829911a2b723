package session

import (
	"context"
	"errors"

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

// reconcileSends starts a sender for each pending send without one and
// stops those the machine no longer holds.
func (s *Session) reconcileSends(ctx context.Context) {
	if s.stopped && len(s.senders) == 0 {
		return
	}
	pending := s.m.PendingSends()
	keep := make(map[string]bool, len(pending))
	for _, p := range pending {
		id := p.Send.Command.ID
		keep[id] = true
		if _, ok := s.senders[id]; !ok && !s.stopped {
			s.startSender(ctx, p)
		}
	}
	for id, sd := range s.senders {
		if !keep[id] {
			sd.cancel()
			delete(s.senders, id)
		}
	}
}

func (s *Session) startSender(ctx context.Context, p runtime.PendingSend) {
	id := p.Send.Command.ID
	sctx, cancel := context.WithCancel(ctx)
	s.senders[id] = &sender{cancel: cancel}
	deadline := p.Since.Add(s.env.ChildSendTimeout)
	s.sendWG.Add(1)
	go func() {
		defer s.sendWG.Done()
		err := s.env.Sends.SendPending(sctx, s.id, p, deadline)
		if sctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, ErrSendExpired) {
			s.log.Warn("pending child send stopped", "to", p.Send.SessionID, "command", id, "err", err)
		}
		select {
		case s.sent <- sendResult{id: id, left: err == nil}:
		case <-sctx.Done():
		}
	}()
}

// sendDone handles a sender's report: a send that left is dropped from
// the checkpoint; an expired one waits for its failure to be applied.
func (s *Session) sendDone(ctx context.Context, r sendResult) error {
	if sd, ok := s.senders[r.id]; ok {
		sd.done = true
	}
	if !r.left {
		return nil
	}
	return s.handle(ctx, runtime.SendsLeft{IDs: []string{r.id}})
}

// stopSenders stops every sender and waits for them.
func (s *Session) stopSenders() {
	for id, sd := range s.senders {
		sd.cancel()
		delete(s.senders, id)
	}
	s.sendWG.Wait()
}
