package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runSmoke is -scenario smoke: a few sessions moved from blue to green by a
// delivery through green's ingress, then the stack's replicas and the
// channel user's permissions.
func runSmoke(ctx context.Context, c config) error {
	for _, base := range []string{c.blue, c.green} {
		if err := waitReady(ctx, base); err != nil {
			return err
		}
	}
	log.Printf("both ingresses ready")
	ids, err := startOnBlue(ctx, c)
	if err != nil {
		return err
	}
	seqs, err := deliverThroughGreen(ctx, c, ids)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() { errs[i] = checkMoved(ctx, c, i, id, seqs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Printf("%d sessions moved %s → %s, each command applied once", len(ids), c.blueID, c.greenID)
	return checkStack(ctx, c, ids[0])
}

// startOnBlue starts the sessions on blue (retrying while no blue owner
// answers yet) and waits until each is idle there.
func startOnBlue(ctx context.Context, c config) ([]string, error) {
	ids := make([]string, c.sessions)
	for i := range ids {
		var r ingress.Receipt
		body := map[string]any{"alias": fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano(), i), "text": fmt.Sprintf("blue %d", i)}
		if err := retry(ctx, func() error { return call(ctx, "POST", c.blue+"/v1/sessions", body, http.StatusCreated, &r) }); err != nil {
			return nil, fmt.Errorf("create session %d on blue: %w", i, err)
		}
		if r.DeploymentID != c.blueID || !r.Created {
			return nil, fmt.Errorf("create session %d: receipt %+v, want created on %s", i, r, c.blueID)
		}
		ids[i] = r.SessionID
	}
	log.Printf("%d sessions started on %s", len(ids), c.blueID)
	for i, id := range ids {
		if _, err := waitStatus(ctx, c.blue, id, func(s ingress.Status) bool { return s.DeploymentID == c.blueID && s.Idle }); err != nil {
			return nil, fmt.Errorf("session %d (%s) never idle on %s: %w", i, id, c.blueID, err)
		}
	}
	log.Printf("all idle on %s; delivering through %s's ingress", c.blueID, c.greenID)
	return ids, nil
}

// deliverThroughGreen delivers to each session through green: the green
// stamp makes each idle blue session hand off to green. Each delivery is
// sent twice with one idempotency key; it returns the receipts' seqs.
func deliverThroughGreen(ctx context.Context, c config, ids []string) ([]uint64, error) {
	seqs := make([]uint64, len(ids))
	for i, id := range ids {
		body := map[string]any{"sessionId": id, "text": fmt.Sprintf("green %d", i), "idempotencyKey": fmt.Sprintf("e2e-%d", i)}
		var first, again ingress.Receipt
		if err := retry(ctx, func() error { return call(ctx, "POST", c.green+"/v1/deliveries", body, http.StatusAccepted, &first) }); err != nil {
			return nil, fmt.Errorf("deliver to session %d through green: %w", i, err)
		}
		if err := call(ctx, "POST", c.green+"/v1/deliveries", body, http.StatusAccepted, &again); err != nil {
			return nil, fmt.Errorf("repeat delivery to session %d: %w", i, err)
		}
		if first.DeploymentID != c.greenID || again != first {
			return nil, fmt.Errorf("session %d: receipts %+v then %+v, want one receipt stamped %s", i, first, again, c.greenID)
		}
		seqs[i] = first.Seq
	}
	return seqs, nil
}

// checkMoved waits until session id is owned by green and idle, then checks
// its events: contiguous from 1, the green command applied once (with the
// receipt's seq) and echoed once, the blue first message echoed once, and a
// completed handoff.
func checkMoved(ctx context.Context, c config, i int, id string, seq uint64) error {
	st, err := waitStatus(ctx, c.green, id, func(s ingress.Status) bool { return s.DeploymentID == c.greenID && s.Idle })
	if err != nil {
		return fmt.Errorf("session %d (%s) never idle on %s: %w", i, id, c.greenID, err)
	}
	var evs []wire.Event
	if err := call(ctx, "GET", c.green+"/v1/sessions/"+id+"/events?follow=false", nil, http.StatusOK, &evs); err != nil {
		return fmt.Errorf("session %d events: %w", i, err)
	}
	applied, greenOut, blueOut, handoffs := 0, 0, 0, 0
	for n, e := range evs {
		if e.Seq != uint64(n+1) {
			return fmt.Errorf("session %d: event %d has seq %d (not contiguous)", i, n, e.Seq)
		}
		switch e.Kind {
		case wire.EventCommandApplied:
			var d struct{ Seq uint64 }
			_ = json.Unmarshal(e.Data, &d)
			if d.Seq == seq {
				applied++
			}
		case wire.EventMessageOutput:
			var d struct{ Text string }
			_ = json.Unmarshal(e.Data, &d)
			switch d.Text {
			case fmt.Sprintf("green %d", i):
				greenOut++
				if e.DeploymentID != c.greenID {
					return fmt.Errorf("session %d: the green message was answered on %s", i, e.DeploymentID)
				}
			case fmt.Sprintf("blue %d", i):
				blueOut++
			}
		case wire.EventHandoffCompleted:
			handoffs++
		}
	}
	if applied != 1 || greenOut != 1 || blueOut != 1 || handoffs != 1 {
		return fmt.Errorf("session %d (%s, state %s, epoch %d): command.applied(seq %d)=%d, green output=%d, blue output=%d, handoff.completed=%d; want 1 each",
			i, id, st.State, st.Epoch, seq, applied, greenOut, blueOut, handoffs)
	}
	return nil
}

// checkStack checks the replicas of every stream and bucket, and the
// channel user's permissions, unless their flags are off.
func checkStack(ctx context.Context, c config, id string) error {
	if c.replicas > 0 {
		if err := checkReplicas(ctx, c); err != nil {
			return err
		}
		log.Printf("every stream and bucket has %d replicas", c.replicas)
	}
	if c.channelURL != "" {
		if err := checkChannelUser(ctx, c, id); err != nil {
			return err
		}
		log.Printf("channel user: ingress service allowed, inbox subjects refused")
	}
	return nil
}

func checkReplicas(ctx context.Context, c config) error {
	nc, err := nats.Connect(c.natsURL, nats.Name("baton-e2e"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, name := range []string{"BATON_INBOX", "BATON_EVENTS", "BATON_TASKS", "KV_baton_sessions", "KV_baton_hooks", "KV_baton_owners", "KV_baton_journal", "KV_baton_receipts", "OBJ_baton_state"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != c.replicas || info.Cluster == nil || len(info.Cluster.Replicas) != c.replicas-1 {
			return fmt.Errorf("stream %s: %d replicas configured, cluster %+v; want %d", name, info.Config.Replicas, info.Cluster, c.replicas)
		}
	}
	return nil
}

// checkChannelUser: the channel-service user may request baton.ingress.*
// and must not publish to an inbox subject.
func checkChannelUser(ctx context.Context, c config, id string) error {
	violations := make(chan error, 4)
	nc, err := nats.Connect(c.channelURL, nats.Name("baton-e2e-channel"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case violations <- err:
			default:
			}
		}))
	if err != nil {
		return err
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]string{"sessionId": id})
	msg, err := nc.RequestWithContext(ctx, "baton.ingress.status", req)
	if err != nil {
		return fmt.Errorf("channel user: baton.ingress.status: %w", err)
	}
	var st ingress.Status
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.DeploymentID != c.greenID {
		return fmt.Errorf("channel user: baton.ingress.status answered %s (err %v), want the session on %s", msg.Data, err, c.greenID)
	}
	if err := nc.Publish("baton.inbox."+id, []byte(`{"v":1}`)); err != nil {
		return err
	}
	_ = nc.FlushWithContext(ctx)
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			return fmt.Errorf("channel user: publish to baton.inbox: %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		return errors.New("channel user: a publish to baton.inbox.<id> was not refused")
	}
	return nil
}
