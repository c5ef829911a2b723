package pool

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Idle expiry (Config.EndIdleAfter): a session with no command for the
// limit ends with reason idle_expired — a hibernated one found by the
// sweep in the session index and loaded to end, a loaded one at its own
// tick — while sessions waiting for input or paused never do. Each ends
// once, with one session.started: loaded to end, never run.
func TestIdleExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const limit = 1500 * time.Millisecond
	reg := prometheus.NewRegistry()
	// v1 hibernates quiet sessions at once; v2 keeps them loaded.
	e.owner("v1", "p1", func(c *Config) {
		c.EndIdleAfter, c.HibernateAfter, c.SweepInterval, c.Registerer = limit, 200*time.Millisecond, 200*time.Millisecond, reg
	})
	e.owner("v2", "q1", func(c *Config) { c.EndIdleAfter, c.HibernateAfter = limit, -1 })

	hibernated := e.Start("v1").SessionID
	asking := e.Start("v1").SessionID
	loaded := e.Start("v2").SessionID
	paused := e.Start("v2").SessionID
	e.Send(hibernated, harness.Deliver("hello"))
	e.Send(asking, harness.Deliver("/ask your name?"))
	onV2 := func(c wire.Command) wire.Command { c.AcceptedDeploymentID = "v2"; return c } // no handoff to v1
	e.Send(loaded, onV2(harness.Deliver("hello")))
	e.Send(paused, onV2(harness.Deliver("hello")))
	e.WaitOutput(paused, "hello")
	e.Send(paused, onV2(harness.Control(wire.KindPause)))
	e.WaitKind(paused, wire.EventSessionPaused, 1)
	e.WaitKind(asking, "input.requested", 1)

	for _, id := range []string{hibernated, loaded} {
		evs := e.WaitKind(id, wire.EventSessionEnded, 1)
		e.CheckStream(evs)
		if got := harness.LastData[wire.SessionEndedV4](t, evs, wire.EventSessionEnded); got.Reason != wire.EndIdleExpired || got.By != "" {
			t.Fatalf("session %s ended %+v, want idle_expired", id, got)
		}
		if n := harness.Count(evs, wire.EventSessionStarted); n != 1 {
			t.Fatalf("session %s: %d session.started", id, n)
		}
		if rec := e.Record(id).Record; rec.State != record.StateEnded || rec.DeploymentID != map[string]string{hibernated: "v1", loaded: "v2"}[id] {
			t.Fatalf("session %s: record %s on %s", id, rec.State, rec.DeploymentID)
		}
	}
	// Three limits on, the waiting and the paused session live on.
	time.Sleep(3 * limit)
	for _, id := range []string{asking, paused} {
		if n := harness.Count(e.Events(id), wire.EventSessionEnded); n != 0 {
			t.Fatalf("session %s (waiting or paused) expired", id)
		}
	}
	if got := gather(t, reg)["baton_owner_sessions_idle_expired_total"]; got != 1 {
		t.Fatalf("baton_owner_sessions_idle_expired_total on v1 = %v, want 1", got)
	}
}
