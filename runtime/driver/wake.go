package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// WakeRequest is the body of a request on baton.deploy.<deploymentID>.wake
// (queue group of the deployment's pool, the same as start): make sure the
// session runs. Whichever owner process receives it claims the session by a
// fresh CAS (epoch+1) unless it already runs, or runs on another live
// process. Takeover sends one per session of a dead process, so the claims
// spread over the live peers.
type WakeRequest struct {
	SessionID string `json:"sessionId"`
	// From names the owner process the sender adopts for: the sender holds
	// that process's lease key, so a record still naming it is claimed.
	From string `json:"from,omitempty"`
	// Source says who asks (WakeIngress, WakeTask, ...), for metrics and
	// logs only.
	Source string `json:"source,omitempty"`
	// Forwarded marks a wake passed on by a process of another deployment
	// that found the session hibernated on this one; it is not passed on
	// again.
	Forwarded bool `json:"forwarded,omitempty"`
}

// Wake outcomes.
const (
	WakeLoaded    = "loaded"    // claimed now; runs in the replying process
	WakeRunning   = "running"   // already runs in the replying process
	WakeElsewhere = "elsewhere" // owned by another process (ProcessID) or deployment
	WakeEnded     = "ended"     // the session ended and its owner cleans up
	WakeMissing   = "missing"   // no such session record
)

// WakeReply answers a WakeRequest. Error is set when the session could not
// be loaded now (the sender retries); any outcome is final.
type WakeReply struct {
	SessionID string      `json:"sessionId"`
	Outcome   string      `json:"outcome,omitempty"`
	ProcessID string      `json:"processId,omitempty"` // the process that runs it, when known
	Error     *ReplyError `json:"error,omitempty"`
}

// wakeTimeout bounds one wake request. It is short: a frozen (SIGSTOPped)
// member of the queue group still receives its share of requests and never
// answers, and a retry goes to a random member again. A wake that is only
// slow is harmless to repeat (the second one finds the session running).
const wakeTimeout = 2 * time.Second

// maxWakes bounds the wake requests one process serves at once.
const maxWakes = 32

func (o *Owner) serveWake(msg *nats.Msg) {
	ctx := o.servingCtx()
	o.goBG(ctx, func() {
		var rep WakeReply
		var req WakeRequest
		if err := json.Unmarshal(msg.Data, &req); err != nil {
			rep.Error = &ReplyError{Code: "bad_request", Message: "wake request: " + err.Error()}
		} else {
			if o.faults.dropWake(req) {
				return
			}
			o.wakeSem <- struct{}{}
			rep = o.Wake(ctx, req)
			<-o.wakeSem
		}
		data, _ := json.Marshal(rep)
		_ = msg.Respond(data)
	})
}

// Wake makes sure a session of this deployment runs, and loads it here if
// it should (see WakeRequest). It is the wake responder's handler, also used
// to resume this process's own index.
func (o *Owner) Wake(ctx context.Context, req WakeRequest) WakeReply {
	if err := subjects.ValidateSessionID(req.SessionID); err != nil {
		return WakeReply{SessionID: req.SessionID, Error: &ReplyError{Code: "bad_request", Message: err.Error()}}
	}
	rep := o.wakeRetrying(ctx, req)
	outcome := rep.Outcome
	if rep.Error != nil {
		outcome = "error"
	}
	o.metrics.wake(cmp.Or(req.Source, WakeOther), outcome)
	return rep
}

// wakeRetrying is Wake's decision. A claim that loses its CAS re-reads and
// decides again: a write that landed late (buffered across a reconnect)
// moves the revision without moving the ownership.
func (o *Owner) wakeRetrying(ctx context.Context, req WakeRequest) WakeReply {
	for range 3 {
		if rep, conflict := o.wake(ctx, req); !conflict {
			return rep
		}
	}
	return WakeReply{SessionID: req.SessionID, Error: &ReplyError{Code: "conflict", Message: "claim lost its CAS three times"}}
}

func (o *Owner) wake(ctx context.Context, req WakeRequest) (WakeReply, bool) {
	id := req.SessionID
	rep := WakeReply{SessionID: id}
	fail := func(code string, err error) WakeReply {
		rep.Error = &ReplyError{Code: code, Message: err.Error()}
		return rep
	}
	if !o.leaseValid() {
		return fail("unavailable", ErrFenced), false
	}
	if o.isLoaded(id) {
		rep.Outcome, rep.ProcessID = WakeRunning, o.cfg.ProcessID
		return rep, false
	}
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		rep.Outcome = WakeMissing
		return rep, false
	case err != nil:
		return fail("unavailable", err), false
	}
	rec := cur.Record
	owner := rec.OwnerProcess
	if o.adoptable(ctx, rec) {
		loaded, err := o.adoptRetired(ctx, cur)
		return o.loadReply(rep, loaded, err)
	}
	if rec.DeploymentID != o.cfg.Deployment {
		if rec.State == record.StateHibernated && !req.Forwarded {
			o.forwardWake(rec.DeploymentID, req) // a sender with a stale deployment
		}
		rep.Outcome, rep.ProcessID = WakeElsewhere, owner
		return rep, false
	}
	ours := owner == o.cfg.ProcessID || owner == "" || req.From != "" && owner == req.From || rec.State == record.StateHibernated
	if !ours {
		if rec.State == record.StateEnded {
			rep.Outcome = WakeEnded
			return rep, false
		}
		// Another process's session: it runs there, or that process is
		// dead and is adopted through its own lease and index.
		if !o.peerLive(owner) {
			bg := o.servingCtx()
			o.goBG(bg, func() { o.adopt(bg, owner, []string{id}) })
		}
		rep.Outcome, rep.ProcessID = WakeElsewhere, owner
		return rep, false
	}
	loaded, err := o.load(ctx, id, runtime.BootRecover, &cur, nil)
	return o.loadReply(rep, loaded, err)
}

// loadReply turns the result of a claim into a wake's reply; the bool asks
// Wake to decide again (the record moved on meanwhile).
func (o *Owner) loadReply(rep WakeReply, loaded bool, err error) (WakeReply, bool) {
	code := "unavailable"
	switch {
	case errors.Is(err, record.ErrConflict):
		return rep, true
	case errors.Is(err, ErrAtCapacity):
		code = "at_capacity"
	case errors.Is(err, ErrWaitsPending):
		code = "waits_pending"
	case err == nil && loaded:
		rep.Outcome, rep.ProcessID = WakeLoaded, o.cfg.ProcessID
		return rep, false
	case err == nil:
		rep.Outcome, rep.ProcessID = WakeRunning, o.cfg.ProcessID
		return rep, false
	}
	rep.Error = &ReplyError{Code: code, Message: err.Error()}
	return rep, false
}

// requestWake sends a wake to the deployment's pool and decodes the reply.
func (o *Owner) requestWake(ctx context.Context, req WakeRequest) (WakeReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return WakeReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	msg, err := o.cfg.NC.RequestWithContext(ctx, o.cfg.Names.Wake(o.cfg.Deployment), data)
	if err != nil {
		return WakeReply{}, fmt.Errorf("driver: wake %s: %w", req.SessionID, err)
	}
	var rep WakeReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return WakeReply{}, fmt.Errorf("driver: wake %s reply: %w", req.SessionID, err)
	}
	return rep, nil
}

// forwardWake passes a wake on to the deployment a hibernated session
// belongs to, fire-and-forget: the sender read a stale deployment (the
// session moved since), and nobody else would load it before the sweep.
func (o *Owner) forwardWake(deployment string, req WakeRequest) {
	req.Forwarded = true
	o.sendWake(deployment, req)
}

// sendWake publishes a wake to a deployment's pool, fire-and-forget: a
// loaded session reads its consumer anyway, and the inbox sweeper finds a
// hibernated one whose wake was lost.
func (o *Owner) sendWake(deployment string, req WakeRequest) {
	data, err := json.Marshal(req)
	if err == nil {
		err = o.cfg.NC.Publish(o.cfg.Names.Wake(deployment), data)
	}
	if err != nil {
		o.log.Debug("wake not sent", "session", req.SessionID, "deployment", deployment, "err", err)
	}
}
