package pool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/protocol"
)

// A wake that finds a claim of the session in progress in the same process
// is answered "deferred", never "running": that claim may still be
// deferred by the quarantine backoff or fail. An adopter that took
// "running" for it removed the dead process's index entry of a session
// that then ran nowhere, and that no sweep found again (a restart of the
// dead process under its ID made it live, with the entry gone).
func TestWakeDuringClaimIsDeferred(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var target atomic.Pointer[string] // the session whose claim is held
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p1 := e.owner("v1", "p1", hibernating(time.Second, 0), func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.AfterIndex, failpoint.Do(func(a failpoint.Args) {
			if id := target.Load(); id != nil && *id == a.SessionID {
				once.Do(func() { close(held) })
				<-release
			}
		}))
	})
	id := e.Start("v1").SessionID
	e.waitHibernated(id)
	// Out of memory too (a wake before that is answered "running").
	e.Eventually(wait, "the hibernated session out of p1's memory", func() bool { return !p1.reg.isLoaded(id) })
	target.Store(&id)

	ctx := t.Context()
	claimed := make(chan protocol.WakeReply, 1)
	go func() {
		claimed <- p1.Wake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress})
	}()
	select {
	case <-held:
	case <-time.After(wait):
		t.Fatal("no claim of the hibernated session reached its index entry")
	}
	rep := p1.Wake(ctx, protocol.WakeRequest{SessionID: id, From: "p0", Source: protocol.WakeTakeover})
	if rep.Error != nil || rep.Outcome != protocol.WakeDeferred || rep.ProcessID != "p1" {
		t.Fatalf("a wake during the claim: %+v, want deferred by p1", rep)
	}
	if p1.reg.isLoaded(id) {
		t.Fatal("the session counts as loaded before its claim landed")
	}
	target.Store(nil)
	close(release)
	select {
	case rep := <-claimed:
		if rep.Error != nil || rep.Outcome != protocol.WakeLoaded {
			t.Fatalf("the held claim: %+v, want loaded", rep)
		}
	case <-time.After(wait):
		t.Fatal("the held claim did not finish")
	}
	if rep := p1.Wake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress}); rep.Outcome != protocol.WakeRunning && rep.Outcome != protocol.WakeLoaded {
		t.Fatalf("a wake after the claim: %+v, want running (or loaded again after a hibernation)", rep)
	}
}
