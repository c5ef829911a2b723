package pool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// The wake request and reply are protocol.WakeRequest and
// protocol.WakeReply; this file serves and sends them.

// wakeTimeout bounds one wake request. It is short: a frozen (SIGSTOPped)
// member of the queue group still receives its share of requests and never
// answers, and a retry goes to a random member again. A wake that is only
// slow is harmless to repeat (the second one finds the session running).
const wakeTimeout = 2 * time.Second

// maxWakes bounds the wake requests one process serves at once.
const maxWakes = 32

func (o *Owner) serveWake(msg *nats.Msg) {
	ctx := o.reg.serving()
	o.reg.goBG(ctx, func() {
		req, err := protocol.DecodeWake(msg.Data)
		if err != nil {
			respond(msg, protocol.WakeReply{Error: protocol.Refuse(protocol.CodeBadRequest, err)})
			return
		}
		if o.fp.dropWake(req) {
			return
		}
		o.wakeSem <- struct{}{}
		rep := o.Wake(ctx, req)
		<-o.wakeSem
		respond(msg, rep)
	})
}

// Wake makes sure a session of this deployment runs, and loads it here if
// it should (see protocol.WakeRequest). It is the wake responder's handler,
// also used to resume this process's own index.
func (o *Owner) Wake(ctx context.Context, req protocol.WakeRequest) protocol.WakeReply {
	if err := subjects.ValidateSessionID(req.SessionID); err != nil {
		return protocol.WakeReply{SessionID: req.SessionID, Error: protocol.Refuse(protocol.CodeBadRequest, err)}
	}
	rep := o.wakeRetrying(ctx, req)
	outcome := string(rep.Outcome)
	if rep.Error != nil {
		outcome = "error"
	}
	o.metrics.wake(cmp.Or(req.Source, protocol.WakeOther), outcome)
	return rep
}

// wakeRetrying is Wake's decision. A claim that loses its CAS re-reads and
// decides again: a write that landed late (buffered across a reconnect)
// moves the revision without moving the ownership.
func (o *Owner) wakeRetrying(ctx context.Context, req protocol.WakeRequest) protocol.WakeReply {
	for range 3 {
		if rep, conflict := o.wake(ctx, req); !conflict {
			return rep
		}
	}
	return protocol.WakeReply{SessionID: req.SessionID, Error: &protocol.ReplyError{Code: protocol.CodeConflict, Message: "claim lost its CAS three times"}}
}

func (o *Owner) wake(ctx context.Context, req protocol.WakeRequest) (protocol.WakeReply, bool) {
	id := req.SessionID
	rep := protocol.WakeReply{SessionID: id}
	fail := func(code protocol.Code, err error) protocol.WakeReply {
		rep.Error = protocol.Refuse(code, err)
		return rep
	}
	if !o.lease.valid() {
		return fail(protocol.CodeUnavailable, ErrFenced), false
	}
	if o.reg.isLoaded(id) {
		rep.Outcome, rep.ProcessID = protocol.WakeRunning, o.cfg.ProcessID
		return rep, false
	}
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		rep.Outcome = protocol.WakeMissing
		return rep, false
	case err != nil:
		return fail(protocol.CodeUnavailable, err), false
	}
	rec := cur.Record
	owner := rec.OwnerProcess
	switch {
	case rec.Quarantined():
		o.quarantinedWake(ctx, rec)
		rep.Outcome = protocol.WakeQuarantined
		return rep, false
	case rec.Terminated():
		_ = o.out.terminated(ctx, rec)
		rep.Outcome = protocol.WakeEnded
		return rep, false
	case rec.FinishPending():
		o.fin.finishLater(id)
		rep.Outcome = protocol.WakeEnded
		return rep, false
	}
	if t := rec.Retry; t != nil && t.DeploymentID != o.cfg.Deployment {
		// An operator retried it on another deployment: that one adopts it.
		if !req.Forwarded {
			o.wakes.forwardWake(t.DeploymentID, req)
		}
		rep.Outcome = protocol.WakeElsewhere
		return rep, false
	}
	if o.retire.adoptable(rec) {
		loaded, err := o.adoptRetired(ctx, cur)
		return o.loadReply(rep, loaded, err)
	}
	if rec.DeploymentID != o.cfg.Deployment {
		if rec.State == record.StateHibernated && !req.Forwarded {
			o.wakes.forwardWake(rec.DeploymentID, req) // a sender with a stale deployment
		}
		rep.Outcome, rep.ProcessID = protocol.WakeElsewhere, owner
		return rep, false
	}
	ours := owner == o.cfg.ProcessID || owner == "" || req.From != "" && owner == req.From || rec.State == record.StateHibernated
	if !ours {
		if rec.State == record.StateEnded {
			rep.Outcome = protocol.WakeEnded
			return rep, false
		}
		// Another process's session: it runs there, or that process is
		// dead and is adopted through its own lease and index.
		if !o.peers.live(owner) {
			bg := o.reg.serving()
			o.reg.goBG(bg, func() { o.adoption.adopt(bg, owner, []string{id}) })
		}
		rep.Outcome, rep.ProcessID = protocol.WakeElsewhere, owner
		return rep, false
	}
	loaded, err := o.load(ctx, id, runtime.BootRecover, &cur, nil)
	return o.loadReply(rep, loaded, err)
}

// quarantinedWake answers a wake of a quarantined session: nothing runs
// it, but the session.quarantined event its record carries is appended if
// the quarantining process could not (idempotent).
func (o *Owner) quarantinedWake(ctx context.Context, rec record.SessionRecord) {
	if len(rec.FloorEvent) == 0 {
		return
	}
	if _, err := o.out.publishPending(ctx, o.out.appender(rec.SessionID), rec, nil); err != nil {
		o.log.Debug("append the floor event of a quarantined session", "session", rec.SessionID, "err", err)
	}
}

// loadReply turns the result of a claim into a wake's reply; the bool asks
// Wake to decide again (the record moved on meanwhile).
func (o *Owner) loadReply(rep protocol.WakeReply, loaded bool, err error) (protocol.WakeReply, bool) {
	code := protocol.CodeUnavailable
	switch {
	case errors.Is(err, record.ErrConflict):
		return rep, true
	case errors.Is(err, ErrAtCapacity):
		code = protocol.CodeAtCapacity
	case errors.Is(err, ErrWaitsPending):
		code = protocol.CodeWaitsPending
	case errors.Is(err, ErrQuarantined):
		rep.Outcome = protocol.WakeQuarantined
		return rep, false
	case errors.Is(err, errTerminated), errors.Is(err, errEndPending):
		rep.Outcome = protocol.WakeEnded
		return rep, false
	case errors.Is(err, ErrDeferred), errors.Is(err, errClaiming):
		rep.Outcome, rep.ProcessID = protocol.WakeDeferred, o.cfg.ProcessID
		return rep, false
	case err == nil && loaded:
		rep.Outcome, rep.ProcessID = protocol.WakeLoaded, o.cfg.ProcessID
		return rep, false
	case err == nil:
		rep.Outcome, rep.ProcessID = protocol.WakeRunning, o.cfg.ProcessID
		return rep, false
	}
	rep.Error = protocol.Refuse(code, err)
	return rep, false
}

// wakes sends wake requests to deployments' pools (protocol.WakeRequest
// on baton.deploy.<deployment>.wake): a request this process waits for, or
// a message it does not.
type wakes struct {
	nc         *nats.Conn
	names      subjects.Names
	deployment string // this process's
	log        *slog.Logger
}

// requestWake sends a wake to the deployment's pool and decodes the reply.
func (o *wakes) requestWake(ctx context.Context, req protocol.WakeRequest) (protocol.WakeReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return protocol.WakeReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	msg, err := o.nc.RequestWithContext(ctx, o.names.Wake(o.deployment), data)
	if err != nil {
		return protocol.WakeReply{}, fmt.Errorf("pool: wake %s: %w", req.SessionID, err)
	}
	var rep protocol.WakeReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.WakeReply{}, fmt.Errorf("pool: wake %s reply: %w", req.SessionID, err)
	}
	return rep, nil
}

// forwardWake passes a wake on to the deployment a hibernated session
// belongs to, fire-and-forget: the sender read a stale deployment (the
// session moved since), and nobody else would load it before the sweep.
func (o *wakes) forwardWake(deployment string, req protocol.WakeRequest) {
	req.Forwarded = true
	o.sendWake(deployment, req)
}

// sendWake publishes a wake to a deployment's pool, fire-and-forget: a
// loaded session reads its consumer anyway, and the inbox sweeper finds a
// hibernated one whose wake was lost.
func (o *wakes) sendWake(deployment string, req protocol.WakeRequest) {
	data, err := json.Marshal(req)
	if err == nil {
		err = o.nc.Publish(o.names.Wake(deployment), data)
	}
	if err != nil {
		o.log.Debug("wake not sent", "session", req.SessionID, "deployment", deployment, "err", err)
	}
}
