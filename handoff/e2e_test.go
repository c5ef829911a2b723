package handoff_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/baton-rt/baton/internal/failpoint"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/nats-io/nats.go"
)

// serve answers handoff starts for deployment dep on nc the way an owner
// pool does (queue group of the deployment), and records the activations
// it would run.
type pool struct {
	mu   sync.Mutex
	runs []handoff.Activation
}

func serve(t *testing.T, nc *nats.Conn, st handoff.Store, dep string) *pool {
	t.Helper()
	srv := &pool{}
	r := responder{Store: st, Candidate: handoff.Candidate{Deployment: dep, ProcessID: "p-" + dep, Validate: validate},
		NewRunID: func() string { return newID("run-" + dep + "-") }}
	sub, err := nc.QueueSubscribe(names.Start(dep), names.QueueGroup(dep), func(m *nats.Msg) {
		reply, act, err := r.Handle(context.Background(), m.Data)
		if err == nil && !act.Replayed {
			srv.mu.Lock()
			srv.runs = append(srv.runs, act)
			srv.mu.Unlock()
		}
		data, _ := json.Marshal(reply)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// natsRequest builds a handoff request for a new session with a trigger in
// its inbox.
func natsRequest(t *testing.T, n *natsServer, b *backend) handoff.Request {
	t.Helper()
	s := activeSession(t, n.st, nil)
	id := s.Record.SessionID
	return handoff.Request{HandoffID: "ho-" + id, SessionID: id, SourceRun: srcRun, Source: srcDeployment, Target: candDeployment,
		Trigger: handoff.Trigger{CommandID: "c1", Seq: b.publish(t, id)}, Tokens: []string{id, "al-" + id}, Record: s}
}

func natsTxn(n *natsServer) handoff.Txn {
	return handoff.Txn{Store: n.st, Starter: handoff.NATSStarter{NC: n.nc, Names: names},
		Backlog: kv.NewBacklog(n.js, names)}
}

// TestOverNATS: the whole transaction over a real server — NATS start
// request, responder, leader-read backlog check.
func TestOverNATS(t *testing.T) {
	n := newNATS(t)
	b := n.backend(t)
	green := serve(t, n.nc, n.st, candDeployment)

	t.Run("moves", func(t *testing.T) {
		req := natsRequest(t, n, b)
		txn := natsTxn(n)
		var mid handoff.Status
		txn.Failpoints = stepPoints(failpoint.HandoffSourceBefore, failpoint.HandoffSourceAfter, func(s handoff.Step) error {
			if s == handoff.StepStart {
				mid, _ = handoff.Resolve(testCtx(t), n.st, req.SessionID)
			}
			return nil
		}, nil)
		res, err := txn.Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Moved {
			t.Fatalf("%+v %v", res, err)
		}
		if !mid.Alive || !mid.MidHandoff || mid.Marker == nil || mid.Session.Record.State != record.StateHandoff {
			t.Fatalf("mid-handoff status %+v", mid)
		}
		cur, _ := n.st.LeaderSession(testCtx(t), req.SessionID)
		green.mu.Lock()
		ran := green.runs[len(green.runs)-1]
		green.mu.Unlock()
		if cur.Revision != ran.Session.Revision || cur.Record.OwnerRunID != ran.Session.Record.OwnerRunID ||
			res.Session.Revision != cur.Revision || cur.Record.Epoch != 2 || cur.Record.DeploymentID != candDeployment {
			t.Fatalf("record %+v, activation %+v", cur.Record, ran.Session.Record)
		}
		if st, _ := handoff.Resolve(testCtx(t), n.st, req.SessionID); st.MidHandoff || st.Marker != nil {
			t.Fatalf("after: %+v", st)
		}
	})

	t.Run("a leftover marker is replaced", func(t *testing.T) {
		req := natsRequest(t, n, b)
		if _, err := n.st.CreateMarker(testCtx(t), record.Marker{HandoffID: "old", SessionID: req.SessionID, Target: "red"}); err != nil {
			t.Fatal(err)
		}
		res, err := natsTxn(n).Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Moved {
			t.Fatalf("%+v %v", res, err)
		}
		if _, _, err := n.st.GetMarker(testCtx(t), req.SessionID); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("marker: %v", err)
		}
	})

	t.Run("backlog stays on the source", func(t *testing.T) {
		req := natsRequest(t, n, b)
		later := b.publish(t, "al-"+req.SessionID)
		res, err := natsTxn(n).Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Kept || res.SkipReason != handoff.SkipQueued || res.Failure != nil ||
			res.Session.Record.Handoff.Outcome != handoff.OutcomeAbandoned || res.Session.Record.State != record.StateActive {
			t.Fatalf("%+v %v", res, err)
		}
		if !b.holds(t, later) || !b.holds(t, req.Trigger.Seq) {
			t.Fatal("inbox lost a command")
		}
	})

	t.Run("no responders", func(t *testing.T) {
		req := natsRequest(t, n, b)
		req.Target = "nobody"
		res, err := natsTxn(n).Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Kept || res.Failure == nil || res.Failure.Step != handoff.StepStart ||
			!strings.Contains(res.Failure.Reason, handoff.ErrNoResponders.Error()) || res.Session.Record.Epoch != 1 {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("not a handoff responder", func(t *testing.T) {
		sub, err := n.nc.Subscribe(names.Start("legacy"), func(m *nats.Msg) { _ = m.Respond([]byte(`{"sessionId":"new","created":true}`)) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		req := natsRequest(t, n, b)
		req.Target = "legacy"
		res, err := natsTxn(n).Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Kept || res.Failure == nil || !strings.Contains(res.Failure.Reason, "did not activate") {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("a frozen candidate costs one attempt; asked late, it replays", func(t *testing.T) {
		req := natsRequest(t, n, b)
		txn := natsTxn(n)
		frozen := &frozenFirst{Starter: txn.Starter}
		txn.Starter, txn.StartAttempt = frozen, 200*time.Millisecond
		began := time.Now()
		res, err := txn.Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Moved || frozen.calls != 2 {
			t.Fatalf("%+v %v after %d start requests", res, err, frozen.calls)
		}
		if d := time.Since(began); d >= handoff.DefaultStartTimeout {
			t.Fatalf("moved after %s: the frozen candidate cost the whole start timeout", d)
		}
		// The frozen process thaws and handles the request it held: the
		// activation is recorded, so it answers it without running the
		// session.
		data, _ := json.Marshal(frozen.held)
		r := responder{Store: n.st, Candidate: handoff.Candidate{Deployment: candDeployment, ProcessID: "frozen", RunID: "thawed", Validate: validate}}
		reply, act, err := r.Handle(testCtx(t), data)
		if err != nil || !reply.Activated || !act.Replayed {
			t.Fatalf("thawed candidate: %+v %+v %v", reply, act, err)
		}
	})

	t.Run("start times out; the late candidate is fenced", func(t *testing.T) {
		held := make(chan *nats.Msg, 1)
		sub, err := n.nc.Subscribe(names.Start("slow"), func(m *nats.Msg) { held <- m })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		req := natsRequest(t, n, b)
		req.Target = "slow"
		txn := natsTxn(n)
		txn.StartTimeout = 200 * time.Millisecond
		res, err := txn.Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Kept || res.Failure == nil || res.Failure.Step != handoff.StepStart {
			t.Fatalf("%+v %v", res, err)
		}
		m := <-held
		r := responder{Store: n.st, Candidate: handoff.Candidate{Deployment: "slow", ProcessID: "p", RunID: "late", Validate: validate}}
		reply, _, err := r.Handle(testCtx(t), m.Data)
		if !errors.Is(err, handoff.ErrStale) || reply.Activated || reply.Error.Code != protocol.CodeRefused {
			t.Fatalf("late candidate: %+v %v", reply, err)
		}
	})
}

// frozenFirst is a Starter whose first request reaches a frozen candidate
// process: held, never answered (the attempt times out); later requests go
// through Starter.
type frozenFirst struct {
	handoff.Starter
	calls int
	held  protocol.HandoffStart
}

func (f *frozenFirst) Start(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error) {
	f.calls++
	if f.calls == 1 {
		f.held = req
		<-ctx.Done()
		return protocol.HandoffStartReply{}, ctx.Err()
	}
	return f.Starter.Start(ctx, req)
}
