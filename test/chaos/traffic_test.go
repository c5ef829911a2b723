package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// deployments are the two deployments traffic alternates between.
var deployments = [2]string{"blue", "green"}

// inFlight is how many of a session's accepted deliveries may wait to be
// applied before its client sends the next one.
const inFlight = 3

type session struct {
	i  int
	id string
	n  atomic.Int64 // deliveries sent, for idempotency keys
}

// post POSTs body to dep's ingress, retrying transport errors and 503s
// with the same idempotency key (a retry gets the first receipt), and
// records the accepted command with the time of its first attempt.
func (w *world) post(ctx context.Context, dep, path string, body map[string]any, want int) (ingress.Receipt, error) {
	key, _ := body["idempotencyKey"].(string)
	sent := time.Now()
	deadline := sent.Add(wait)
	for {
		r, err := w.client.DoJSON(ctx, http.MethodPost, w.ingress[dep]+path, body)
		switch {
		case err == nil && r.Code == want:
			var rc ingress.Receipt
			if err := json.Unmarshal(r.Body, &rc); err != nil || rc.Seq == 0 || rc.SessionID == "" {
				return rc, fmt.Errorf("POST %s: receipt %s: %v", path, r.Body, err)
			}
			text, _ := body["text"].(string)
			w.accepted.Add(rc.SessionID, harness.Accepted{Seq: rc.Seq, Key: key, What: text, Via: dep, Sent: sent})
			return rc, nil
		case err == nil && r.Code != http.StatusServiceUnavailable:
			return ingress.Receipt{}, fmt.Errorf("POST %s %v via %s: %d %s", path, body, dep, r.Code, r.Body)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return ingress.Receipt{}, fmt.Errorf("POST %s via %s: still failing after %s: %d %s %v", path, dep, wait, r.Code, r.Body, err)
		}
		harness.Sleep(ctx, 100*time.Millisecond) // retry pacing, not synchronisation
	}
}

// create starts session s through the ingress of deployments[s.i%2] with a
// first message, and waits until it is applied.
func (w *world) create(ctx context.Context, s *session) error {
	dep := deployments[s.i%2]
	r, err := w.post(ctx, dep, "/v1/sessions", map[string]any{
		"alias": fmt.Sprintf("chaos-%03d", s.i), "text": fmt.Sprintf("hello %d", s.i),
	}, http.StatusCreated)
	if err != nil {
		return err
	}
	s.id = r.SessionID
	return w.tail.WaitApplied(ctx, s.id, r.Seq, wait)
}

// run is one session's client until stop closes: deliveries alternating
// between the deployments' ingresses (every other one hands the session
// off), one in five a short step ("/sleep 300ms") so faults find steps in
// flight, paced like a conversation, at most inFlight waiting to be
// applied.
func (w *world) run(ctx context.Context, s *session, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		k := s.n.Add(1)
		dep := deployments[(int(k)+s.i)%2]
		text := fmt.Sprintf("m %d-%d", s.i, k)
		if rand.IntN(5) == 0 {
			text = "/sleep 300ms"
		}
		if _, err := w.post(ctx, dep, "/v1/deliveries", map[string]any{
			"sessionId": s.id, "text": text, "idempotencyKey": fmt.Sprintf("%s-%d", s.id, k),
		}, http.StatusAccepted); err != nil {
			return err
		}
		acc := w.accepted.Get(s.id)
		if len(acc) > inFlight {
			a := acc[len(acc)-1-inFlight]
			if err := w.tail.WaitApplied(ctx, s.id, a.Seq, 2*wait); err != nil {
				return fmt.Errorf("session %s: delivery %s (seq %d via %s, sent at %s) not applied: %w",
					s.id, a.Key, a.Seq, a.Via, a.Sent.Sub(w.began).Round(time.Millisecond), err)
			}
		}
		harness.Sleep(ctx, time.Duration(400+rand.IntN(600))*time.Millisecond)
	}
}
