package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
)

// ownedBy lists the sessions whose latest record names process p, active.
func (f *full) ownedBy(p string) []string {
	var out []string
	for _, s := range f.sessions {
		if r, ok := f.kvr.Latest(s.id); ok && r.OwnerProcess == p && r.State == record.StateActive {
			out = append(out, s.id)
		}
	}
	return out
}

// takeover waits until each of ids has a record after t naming a process
// other than p; it returns the first and last such delay and what is left.
func (f *full) takeover(ctx context.Context, ids []string, p string, t time.Time, d time.Duration) (first, last time.Duration, left []string) {
	end := time.Now().Add(d)
	for {
		first, last, left = 0, 0, nil
		for _, id := range ids {
			at, ok := f.kvr.FirstOtherOwner(id, p, t)
			if !ok {
				left = append(left, id)
				continue
			}
			dd := at.Sub(t)
			if first == 0 || dd < first {
				first = dd
			}
			last = max(last, dd)
		}
		if len(left) == 0 || time.Now().After(end) || !harness.Sleep(ctx, 200*time.Millisecond) {
			return first, last, left
		}
	}
}

// killGreen2 SIGKILLs owner-green-2 (its restart policy off first), waits
// until green-1 has taken its sessions over, and starts it again.
func (f *full) killGreen2(ctx context.Context) error {
	cid, err := f.container("owner-green-2")
	if err != nil {
		return err
	}
	// killAt is taken before `docker kill`: the failover figure includes the
	// CLI's own latency (an upper bound).
	ids := f.ownedBy("green-2")
	if _, err := docker(ctx, "update", "--restart=no", cid); err != nil {
		return err
	}
	f.killAt = time.Now()
	if _, err := docker(ctx, "kill", "-s", "SIGKILL", cid); err != nil {
		return err
	}
	log.Printf("%s SIGKILL owner-green-2 (%d active sessions)", f.since(), len(ids))
	first, last, left := f.takeover(ctx, ids, "green-2", f.killAt, 45*time.Second)
	if len(left) > 0 {
		return fmt.Errorf("%d of green-2's %d sessions not taken over 45 s after its SIGKILL (e.g. %s)", len(left), len(ids), left[0])
	}
	f.figure("failover after SIGKILL of owner-green-2 (lease TTL %v): %d active sessions taken over by green-1, first after %v, all after %v",
		f.f.leaseTTL, len(ids), first.Round(10*time.Millisecond), last.Round(10*time.Millisecond))
	t := time.Now()
	if _, err := docker(ctx, "start", cid); err != nil {
		return err
	}
	if _, err := docker(ctx, "update", "--restart=unless-stopped", cid); err != nil {
		return err
	}
	if _, ok := waitLogSince(ctx, cid, t, "lease acquired", 30*time.Second); !ok {
		return errors.New("owner-green-2 restarted but acquired no lease within 30 s")
	}
	log.Printf("%s owner-green-2 started again, lease acquired after %v", f.since(), time.Since(t).Round(10*time.Millisecond))
	return nil
}

// restartNATSNode stops nats3 for 10 s, traffic running, and starts it
// again.
func (f *full) restartNATSNode(ctx context.Context) error {
	cid, err := f.container("nats3")
	if err != nil {
		return err
	}
	t := time.Now()
	if _, err := docker(ctx, "stop", "-t", "5", cid); err != nil {
		return err
	}
	log.Printf("%s nats3 stopped (%v)", f.since(), time.Since(t).Round(10*time.Millisecond))
	harness.Sleep(ctx, 10*time.Second)
	if _, err := docker(ctx, "start", cid); err != nil {
		return err
	}
	log.Printf("%s nats3 started again; waiting for it to rejoin", f.since())
	// n3's monitoring port is not published: a settle time instead, with
	// traffic running.
	harness.Sleep(ctx, 5*time.Second)
	f.figure("nats3 down for %v, traffic running", (10 * time.Second).String())
	return nil
}

// partitionGreen1 cuts owner-green-1 off the network for 5 × the lease TTL,
// measures green-2's takeover of its sessions, reconnects it and reports
// its fence and its return.
func (f *full) partitionGreen1(ctx context.Context) error {
	cid, err := f.container("owner-green-1")
	if err != nil {
		return err
	}
	netw, err := docker(ctx, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", cid)
	if err != nil {
		return err
	}
	netw = strings.Fields(netw)[0]
	ids := f.ownedBy("green-1")
	f.greenRunsBeforeCut = f.kvr.RunsOf("green-1")
	cutStart := time.Now()
	if _, err := docker(ctx, "network", "disconnect", netw, cid); err != nil {
		return err
	}
	// The cut happened inside [cutStart, cutAt]: green-1's last lease renewal
	// is before cutAt, so its lease has expired by cutAt + TTL at the latest.
	f.cutAt = time.Now()
	cutFor := 5 * f.f.leaseTTL
	log.Printf("%s owner-green-1 cut off from NATS (network %s, `docker network disconnect` took %v) for %v, %d active sessions",
		f.since(), netw, f.cutAt.Sub(cutStart).Round(time.Millisecond), cutFor, len(ids))
	first, last, left := f.takeover(ctx, ids, "green-1", cutStart, cutFor)
	harness.Sleep(ctx, time.Until(f.cutAt.Add(cutFor)))
	f.reconnectAt = time.Now()
	if _, err := docker(ctx, "network", "connect", netw, cid); err != nil {
		return err
	}
	log.Printf("%s owner-green-1 reconnected", f.since())
	if len(left) > 0 {
		// Sessions without a command during the cut stay with green-1's record
		// until the sweeper finds the lease expired; wait a little longer.
		first, last, left = f.takeover(ctx, ids, "green-1", cutStart, 20*time.Second)
	}
	if len(left) > 0 {
		f.note("%d of green-1's %d sessions were not taken over during its partition", len(left), len(ids))
	}
	f.figure("partition of owner-green-1 (cut %v): %d active sessions taken over by green-2, first after %v, all after %v (from the disconnect command)",
		cutFor, len(ids)-len(left), first.Round(10*time.Millisecond), last.Round(10*time.Millisecond))
	f.reportPartitioned(ctx, cid, cutStart)
	return nil
}

// reportPartitioned reports when the partitioned green-1 fenced itself and
// when it served again after the reconnect.
func (f *full) reportPartitioned(ctx context.Context, cid string, cutStart time.Time) {
	for _, m := range ownerLog(ctx, cid, cutStart) {
		if msg, _ := m["msg"].(string); msg == "fenced: stopping every session" && logTime(m).After(cutStart) {
			f.figure("owner-green-1 fenced itself %v after the disconnect command returned (%v after it started), cause %v",
				logTime(m).Sub(f.cutAt).Round(10*time.Millisecond), logTime(m).Sub(cutStart).Round(10*time.Millisecond), m["cause"])
			break
		}
	}
	t, ok := waitLogSince(ctx, cid, f.reconnectAt, "lease acquired", 20*time.Second)
	if !ok {
		t, ok = waitLogSince(ctx, cid, f.reconnectAt, "lease re-acquired (still held by this run)", time.Second)
	}
	disc := countLog(ctx, cid, f.cutAt, "nats disconnected")
	if ok {
		f.figure("owner-green-1 serving again %v after the reconnect (lease acquired)", t.Sub(f.reconnectAt).Round(10*time.Millisecond))
	} else {
		f.note("owner-green-1 acquired no lease within 20 s of the reconnect; its NATS client logged %d disconnects since the cut "+
			"(0: it still holds the TCP connection that died with the network, and only its ping timer — nats.go default 2 min × 2 pings — will notice; "+
			"meanwhile every lease write times out: 'acquire lease failed; retrying')", disc)
	}
}
