package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
)

// step is one step's run on a worker.
type step struct {
	a      *Agent
	in     runtime.StepInput
	token  string
	ctx    context.Context // the step's; cancelled by stop
	stop   context.CancelFunc
	stream runtime.Stream
	req    []byte           // the encoded request
	parts  map[string]*part // what the request sent by reference
	seen   atomic.Int64     // unix nanos of the worker's last message
	reply  chan *nats.Msg   // the reply (or no responders)

	jmu  sync.Mutex
	open *call // the journaled call begun and not yet recorded
	n    int   // calls begun
}

// run sends the request until a worker takes it and returns its result.
func (s *step) run() (runtime.StepResult, error) {
	a := s.a
	sub, err := a.cfg.NC.Subscribe(a.cfg.Names.AgentStepTraffic(a.cfg.Deployment, s.token), s.traffic)
	if err != nil {
		return runtime.StepResult{}, fmt.Errorf("remote: subscribe the step's subjects: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	began := time.Now()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, time.Second, 0
	for {
		msg, err := s.send()
		if errors.Is(err, errNoResponders) {
			a.metrics.retries.Inc()
			if time.Since(began) >= a.cfg.UnavailableAfter {
				a.log.Warn("no worker answered the step; it fails", "session", s.in.SessionID, "step", s.in.Key(),
					"subject", a.cfg.Names.AgentStep(a.cfg.Deployment), "window", a.cfg.UnavailableAfter.String())
				return runtime.Failed(runtime.CodeAgentUnavailable, fmt.Errorf("no worker of deployment %s answered on %s for %v",
					a.cfg.Deployment, a.cfg.Names.AgentStep(a.cfg.Deployment), a.cfg.UnavailableAfter)), nil
			}
			a.log.Debug("no worker subscribes to the step request; asking again", "session", s.in.SessionID, "step", s.in.Key(),
				"waited", time.Since(began).Round(time.Millisecond).String())
			if err := sleep(s.ctx, bo.NextBackOff()); err != nil {
				return runtime.StepResult{}, err
			}
			continue
		}
		switch {
		case errors.Is(err, errSilent):
			a.log.Warn("the step's worker went silent; the step fails", "session", s.in.SessionID, "step", s.in.Key(),
				"heartbeat_timeout", a.cfg.HeartbeatTimeout.String())
			return runtime.Failed(runtime.CodeAgentTimeout, fmt.Errorf("the worker sent nothing for %v (heartbeat timeout)", a.cfg.HeartbeatTimeout)), nil
		case err != nil:
			return runtime.StepResult{}, err
		}
		return s.result(msg), nil
	}
}

// send publishes the request once and waits for its reply: errNoResponders
// when nobody subscribes, errSilent when the worker that took it went
// silent, ctx's error when the step was cancelled (the worker is told).
func (s *step) send() (*nats.Msg, error) {
	a := s.a
	s.touch()
	m := &nats.Msg{Subject: a.cfg.Names.AgentStep(a.cfg.Deployment), Reply: a.cfg.Names.AgentReply(a.cfg.Deployment, s.token), Data: s.req}
	if err := a.cfg.NC.PublishMsg(m); err != nil {
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		a.log.Warn("step request not sent; trying again", "error", err)
		return nil, errNoResponders // not connected: as unavailable, within the window
	}
	tick := time.NewTicker(a.cfg.HeartbeatInterval / 2)
	defer tick.Stop()
	for {
		select {
		case msg := <-s.reply:
			if noResponders(msg) {
				return nil, errNoResponders
			}
			return msg, nil
		case <-s.ctx.Done():
			s.cancel(cancelReason(s.ctx))
			return nil, s.ctx.Err()
		case <-tick.C:
			if time.Since(time.Unix(0, s.seen.Load())) > a.cfg.HeartbeatTimeout {
				s.cancel(wire.CodeAgentTimeout)
				return nil, errSilent
			}
		}
	}
}

// traffic handles one message of the step's worker; it never blocks.
func (s *step) traffic(m *nats.Msg) {
	switch kind(m.Subject) {
	case "reply":
		select {
		case s.reply <- m:
		default: // a second reply: only the first counts
		}
		return
	case "cancel":
		return // our own
	}
	s.touch()
	switch kind(m.Subject) {
	case "heartbeat":
		s.heartbeat(m)
	case "delta":
		var d wire.AgentDelta
		if err := wire.DecodeAgent("delta", m.Data, &d); err != nil {
			s.a.log.Debug("a worker's delta is not valid; dropped", "error", err)
			return
		}
		s.stream.Text(d.Text)
	case "journal":
		s.journal(m)
	}
}

// heartbeat logs a heartbeat's note, if it has one.
func (s *step) heartbeat(m *nats.Msg) {
	if len(m.Data) == 0 {
		return
	}
	var hb wire.AgentHeartbeat
	if err := wire.DecodeAgent("heartbeat", m.Data, &hb); err != nil {
		s.a.log.Debug("a worker's heartbeat is not valid (it still counts)", "error", err)
		return
	}
	if hb.Note != "" {
		s.a.log.Debug("worker heartbeat", "session", s.in.SessionID, "step", s.in.Key(), "note", hb.Note)
	}
}

// touch records that the worker is alive.
func (s *step) touch() { s.seen.Store(time.Now().UnixNano()) }

// cancel tells the worker to stop the step.
func (s *step) cancel(reason string) {
	a := s.a
	b, _ := wire.EncodeAgent(wire.AgentCancel{V: wire.AgentProtocolVersion, Token: s.token, Reason: reason})
	if err := a.cfg.NC.Publish(a.cfg.Names.AgentCancel(a.cfg.Deployment, s.token), b); err != nil {
		a.log.Warn("cancel not sent to the step's worker", "error", err)
	}
}

func cancelReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout"
	}
	return "cancelled"
}

// kind is the traffic kind of a step subject <prefix>.agent.<dep>.<kind>.<token>.
func kind(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2]
}

// noResponders reports the server's answer to a request nobody subscribes
// to: no data, status 503.
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
