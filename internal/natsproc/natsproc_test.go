package natsproc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsproc"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestKillRestart: an R3 stream on a three-process cluster loses its leader
// to a SIGKILL, elects another node, takes writes again, and the killed
// node rejoins with its store (it holds every message after WaitReady).
func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-server processes")
	}
	c := natsproc.Start(t, t.TempDir(), 3)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.1", []byte("before")); err != nil {
		t.Fatal(err)
	}
	old, err := c.Leader(ctx, js, "T")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	if c.Running(old) {
		t.Fatalf("node %d still running after Kill", old)
	}
	if err := c.Kill(old); !errors.Is(err, natsproc.ErrNotRunning) {
		t.Fatalf("Kill of a killed node: %v, want ErrNotRunning", err)
	}
	start := time.Now()
	var now int
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		now, err = c.Leader(cctx, js, "T")
		ccancel()
		if err == nil && now != old {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no new leader after killing node %d: %v", old, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("stream T: leader %s killed, %s elected after %s", c.Name(old), c.Name(now), time.Since(start).Round(time.Millisecond))
	if _, err := js.Publish(ctx, "t.2", []byte("during")); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(old); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// a graceful Stop of the new leader hands leadership to one of the two
	// left (one of them the restarted node): the stream still holds both
	// messages
	if err := c.Stop(now); err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		s, err := js.Stream(cctx, "T")
		if err == nil {
			info, err = s.Info(cctx)
		}
		ccancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != c.Name(now) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no leader after a graceful stop of %s: %v", c.Name(now), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream T holds %d messages after the restart, want 2", info.State.Msgs)
	}
	if err := c.Restart(now); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}
