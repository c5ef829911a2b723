package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// parallel runs fn for every session of list, n at a time.
func parallel(list []*fsess, n int, fn func(*fsess) error) error {
	sem := make(chan struct{}, n)
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = fn(s)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// firstText is what a session of kind k is created with.
var firstText = map[kind]string{kBusy: "/sleep 2s", kHITL: "/ask favourite colour?", kTask: "/task 1s", kPlain: "hello", kQuiet: "hello"}

// createSessions creates -sessions sessions on blue through blue's
// ingress, 12 at a time.
func (f *full) createSessions(ctx context.Context) error {
	n := f.c.sessions
	f.sessions = make([]*fsess, n)
	run := time.Now().UnixNano()
	work := make(chan int)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for i := range work {
				f.sessions[i], errs[i] = f.createSession(ctx, run, i)
			}
		})
	}
	t0 := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	counts := map[kind]int{}
	for _, s := range f.sessions {
		f.byID[s.id] = s
		counts[s.kind]++
	}
	log.Printf("%s %d sessions created on %s in %v (busy %d, hitl %d, task %d, plain %d, quiet %d)", f.since(), n, f.c.blueID,
		time.Since(t0).Round(time.Millisecond), counts[kBusy], counts[kHITL], counts[kTask], counts[kPlain], counts[kQuiet])
	return nil
}

// createSession creates session i of the run with its kind's first text.
func (f *full) createSession(ctx context.Context, run int64, i int) (*fsess, error) {
	k := kindOf(i)
	body := map[string]any{"alias": fmt.Sprintf("e2e-full-%d-%d", run, i), "text": firstText[k]}
	var r ingress.Receipt
	if err := retryLong(ctx, 30*time.Second, func() error { return call(ctx, "POST", f.c.blue+"/v1/sessions", body, http.StatusCreated, &r) }); err != nil {
		return nil, fmt.Errorf("create session %d: %w", i, err)
	}
	if r.DeploymentID != f.c.blueID || !r.Created || r.Seq == 0 {
		return nil, fmt.Errorf("create session %d: receipt %+v", i, r)
	}
	s := &fsess{i: i, id: r.SessionID, kind: k}
	s.add(accepted{seq: r.Seq, what: "create", dep: r.DeploymentID})
	return s, nil
}

// deliver sends one delivery with an idempotency key, retrying on 5xx and
// transport errors, and records the receipt.
func (f *full) deliver(ctx context.Context, s *fsess, base, text, key string) error {
	body := map[string]any{"sessionId": s.id, "text": text, "idempotencyKey": key}
	var r ingress.Receipt
	err := retryLong(ctx, 45*time.Second, func() error { return call(ctx, "POST", base+"/v1/deliveries", body, http.StatusAccepted, &r) })
	if err != nil {
		f.failed.Add(1)
		return fmt.Errorf("session %d (%s) delivery %s: %w", s.i, s.id, key, err)
	}
	s.add(accepted{seq: r.Seq, what: "deliver", dep: r.DeploymentID})
	return nil
}

// drive is a session's steady traffic: one delivery every 2–5 s through
// whichever ingress takes the traffic, until the traffic stops.
func (f *full) drive(ctx context.Context, s *fsess) {
	defer f.traffic.Done()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-f.stop:
			return
		case <-time.After(2*time.Second + rand.N(3*time.Second)):
		}
		base := f.c.blue
		if f.toGreen.Load() {
			base = f.c.green
		}
		text := map[kind]string{kBusy: "/sleep 2s", kTask: "/task 1s"}[s.kind]
		if text == "" {
			text = fmt.Sprintf("m%d", n)
		}
		if err := f.deliver(ctx, s, base, text, fmt.Sprintf("%s-%d", s.id, n)); err != nil && ctx.Err() == nil {
			log.Printf("%s delivery refused: %v", f.since(), err)
		}
	}
}

// waitQuiet waits (up to 2 min) until every session is idle on green.
func (f *full) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	t0, lastLog := time.Now(), time.Now()
	defer func() {
		f.figure("quiescence after the traffic stopped: every session idle on green after %v", time.Since(t0).Round(100*time.Millisecond))
	}()
	for {
		bad := f.notQuiet(ctx)
		if len(bad) == 0 {
			log.Printf("%s every session idle on %s", f.since(), f.c.greenID)
			return nil
		}
		sort.Strings(bad)
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			log.Printf("%s %d sessions not idle on green yet, e.g. %v", f.since(), len(bad), bad[:min(3, len(bad))])
		}
		if time.Now().After(deadline) || !harness.Sleep(ctx, 2*time.Second) {
			return fmt.Errorf("%d sessions never idle on green, e.g. %v", len(bad), bad[:min(5, len(bad))])
		}
	}
}

// notQuiet describes every session not idle on green (status through
// green's ingress, 16 at a time).
func (f *full) notQuiet(ctx context.Context) []string {
	var bad []string
	var mu sync.Mutex
	_ = parallel(f.sessions, 16, func(s *fsess) error {
		var st ingress.Status
		err := call(ctx, "GET", f.c.green+"/v1/sessions/"+s.id, nil, http.StatusOK, &st)
		if err != nil || !st.Idle || st.DeploymentID != f.c.greenID {
			r, _ := f.kvr.Latest(s.id)
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%d/%s %s:%s owner=%s queue=%d idle=%v err=%v", s.i, kindNames[s.kind], st.DeploymentID, st.State, r.OwnerProcess, st.QueueDepth, st.Idle, err))
			mu.Unlock()
		}
		return nil
	})
	return bad
}
