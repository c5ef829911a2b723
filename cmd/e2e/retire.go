package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

func (f *full) ofKind(k kind) []*fsess {
	var out []*fsess
	for _, s := range f.sessions {
		if s.kind == k {
			out = append(out, s)
		}
	}
	return out
}

// onDeployment splits list by whether the KV watcher last saw each on dep.
func (f *full) onDeployment(list []*fsess, dep string) (on, off []*fsess) {
	for _, s := range list {
		if r, ok := f.kvr.Latest(s.id); ok && r.DeploymentID == dep {
			on = append(on, s)
		} else {
			off = append(off, s)
		}
	}
	return on, off
}

// forceMove POSTs a forced admin move of every session of list to green.
func (f *full) forceMove(ctx context.Context, list []*fsess, round int) error {
	return parallel(list, 8, func(s *fsess) error {
		var r struct {
			ingress.Receipt
			Force bool `json:"force"`
		}
		body := map[string]any{"deploymentId": f.c.greenID, "force": true, "idempotencyKey": fmt.Sprintf("force-%d-%s", round, s.id)}
		err := retryLong(ctx, 30*time.Second, func() error {
			return f.admin(ctx, "POST", f.c.green+"/v1/admin/sessions/"+s.id+"/move", body, http.StatusAccepted, &r)
		})
		if err != nil {
			return fmt.Errorf("forced move of session %d (%s): %w", s.i, s.id, err)
		}
		s.add(accepted{seq: r.Seq, what: "move", dep: r.DeploymentID})
		return nil
	})
}

// waitOn waits until every session of list is on dep per the KV watcher.
func (f *full) waitOn(ctx context.Context, list []*fsess, dep string, d time.Duration) []*fsess {
	end := time.Now().Add(d)
	for {
		_, off := f.onDeployment(list, dep)
		if len(off) == 0 || time.Now().After(end) || !harness.Sleep(ctx, 250*time.Millisecond) {
			return off
		}
	}
}

// retireAndStopBlue is step 4: retire blue, force-move the hitl sessions,
// SIGTERM both blue owners, force-move what a live owner skipped, and have
// green adopt the quiet sessions.
func (f *full) retireAndStopBlue(ctx context.Context) error {
	if err := f.retireBlue(ctx); err != nil {
		return err
	}
	hitl := f.ofKind(kHITL)
	if err := f.forceMoveLive(ctx, hitl); err != nil {
		return err
	}
	if err := f.sigtermBlue(ctx); err != nil {
		return err
	}
	if err := f.forceMoveAdopted(ctx, hitl); err != nil {
		return err
	}
	// Each moved hitl session takes a delivery on green.
	if err := parallel(hitl, 8, func(s *fsess) error {
		return f.deliver(ctx, s, f.c.green, "after the forced move", "after-force-"+s.id)
	}); err != nil {
		return err
	}
	if err := f.adoptQuiet(ctx); err != nil {
		return err
	}
	if _, off := f.onDeployment(f.sessions, f.c.greenID); len(off) > 0 {
		f.note("%d sessions not yet on green after blue stopped (they move on their next command)", len(off))
	}
	if rep, err := f.report(ctx); err == nil {
		log.Printf("%s drain report: blue %v | green %v", f.since(), rep[f.c.blueID], rep[f.c.greenID])
	}
	return nil
}

// retireBlue retires blue through green's admin route.
func (f *full) retireBlue(ctx context.Context) error {
	var rr struct {
		Retired   bool   `json:"retired"`
		RetiredAt string `json:"retiredAt"`
		Changed   bool   `json:"changed"`
	}
	if err := f.admin(ctx, "POST", f.c.green+"/v1/admin/deployments/"+f.c.blueID+"/retire", nil, http.StatusOK, &rr); err != nil {
		return fmt.Errorf("retire blue: %w", err)
	}
	if !rr.Retired || !rr.Changed {
		return fmt.Errorf("retire blue: %+v", rr)
	}
	log.Printf("%s blue retired at %s", f.since(), rr.RetiredAt)
	return nil
}

// forceMoveLive force-moves the hitl sessions with the blue owners
// running: a live owner cancels the waits and hands off (wait.cancelled on
// blue).
func (f *full) forceMoveLive(ctx context.Context, hitl []*fsess) error {
	t0 := time.Now()
	if err := f.forceMove(ctx, hitl, 1); err != nil {
		return err
	}
	notMoved := f.waitOn(ctx, hitl, f.c.greenID, 8*time.Second)
	log.Printf("%s forced moves with the blue owners running: %d of %d hitl sessions moved in %v, %d still on blue",
		f.since(), len(hitl)-len(notMoved), len(hitl), time.Since(t0).Round(100*time.Millisecond), len(notMoved))
	if len(notMoved) > 0 {
		// Give a loaded machine more time before failing.
		if notMoved = f.waitOn(ctx, notMoved, f.c.greenID, 45*time.Second); len(notMoved) > 0 {
			return fmt.Errorf("%d of %d hitl sessions not on green 45 s after a forced move with their blue owner live (e.g. %s)",
				len(notMoved), len(hitl), notMoved[0].id)
		}
	}
	return nil
}

// sigtermBlue SIGTERMs both blue owners (their restart policy off first):
// each drains and exits 0.
func (f *full) sigtermBlue(ctx context.Context) error {
	type stopped struct {
		svc  string
		code string
		took time.Duration
		err  error
	}
	res := make([]stopped, 2)
	var wg sync.WaitGroup
	for i, svc := range []string{"owner-blue-1", "owner-blue-2"} {
		wg.Go(func() {
			res[i].svc = svc
			res[i].code, res[i].took, res[i].err = f.sigterm(ctx, svc)
		})
	}
	wg.Wait()
	for _, r := range res {
		if r.err != nil {
			return r.err
		}
		if r.code != "0" {
			return fmt.Errorf("%s exited %s after SIGTERM, want 0 (a drained exit)", r.svc, r.code)
		}
		f.figure("%s: SIGTERM → drained, exit 0 in %v", r.svc, r.took.Round(10*time.Millisecond))
	}
	return nil
}

// sigterm stops the container of svc with SIGTERM after disabling its
// restart policy; it returns the exit code and how long the stop took.
func (f *full) sigterm(ctx context.Context, svc string) (string, time.Duration, error) {
	cid, err := f.container(svc)
	if err != nil {
		return "", 0, err
	}
	if _, err := docker(ctx, "update", "--restart=no", cid); err != nil {
		return "", 0, err
	}
	t := time.Now()
	if _, err := docker(ctx, "kill", "-s", "SIGTERM", cid); err != nil {
		return "", 0, err
	}
	code, err := docker(ctx, "wait", cid)
	return code, time.Since(t), err
}

// forceMoveAdopted forces again whatever hitl session a live blue owner
// skipped: with blue stopped, green adopts it.
func (f *full) forceMoveAdopted(ctx context.Context, hitl []*fsess) error {
	_, off := f.onDeployment(hitl, f.c.greenID)
	if len(off) > 0 {
		t1 := time.Now()
		if err := f.forceMove(ctx, off, 2); err != nil {
			return err
		}
		if left := f.waitOn(ctx, off, f.c.greenID, 45*time.Second); len(left) > 0 {
			return fmt.Errorf("%d hitl sessions still not on green 45 s after a forced move with blue stopped (e.g. %s)", len(left), left[0].id)
		}
		log.Printf("%s forced moves after the blue owners stopped: %d sessions adopted by green in %v", f.since(), len(off), time.Since(t1).Round(100*time.Millisecond))
	}
	f.figure("hitl sessions force-moved: %d (%d by a live blue owner's handoff, %d adopted after blue stopped)", len(hitl), len(hitl)-len(off), len(off))
	return nil
}

// adoptQuiet delivers to each quiet session (still blue, hibernated by the
// drain) through green's ingress: green adopts them.
func (f *full) adoptQuiet(ctx context.Context) error {
	quiet := f.ofKind(kQuiet)
	t2 := time.Now()
	if err := parallel(quiet, 8, func(s *fsess) error {
		return f.deliver(ctx, s, f.c.green, "after retirement", "quiet-"+s.id)
	}); err != nil {
		return err
	}
	if left := f.waitOn(ctx, quiet, f.c.greenID, 45*time.Second); len(left) > 0 {
		return fmt.Errorf("%d quiet sessions of retired blue not adopted by green within 45 s (e.g. %s)", len(left), left[0].id)
	}
	f.figure("quiet sessions adopted from retired blue on their next command: %d in %v", len(quiet), time.Since(t2).Round(100*time.Millisecond))
	return nil
}

// admin is call with the admin token.
func (f *full) admin(ctx context.Context, method, url string, body any, want int, out any) error {
	return call(ctx, method, url, body, want, out, harness.Bearer(f.token))
}
