package app

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

func TestRedact(t *testing.T) {
	got := Redact("nats://owner:s3cret@127.0.0.1:4222, nats://127.0.0.1:4223,nats://tok@h:1")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "owner:xxxxx@127.0.0.1:4222") || !strings.Contains(got, "nats://127.0.0.1:4223") {
		t.Fatalf("Redact: %s", got)
	}
	if _, err := Connect("nats://owner:s3cret@127.0.0.1:1", "t", nil, nil); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Connect's error shows the password: %v", err)
	}
}

// A subscription that falls behind is logged with its subject and what it
// dropped, and counted: a slow consumer is never silent.
func TestSlowConsumerLoggedAndCounted(t *testing.T) {
	s := natstest.Server(t)
	var buf harness.LogCapture
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	m := NewConnMetrics()
	nc, err := Connect(s.ClientURL(), "t", log, m)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ch := make(chan *nats.Msg, 1) // never read: the second message overflows it
	sub, err := nc.ChanSubscribe("slow.sub", ch)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := nc.Publish("slow.sub", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "nats asynchronous error") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var line struct {
		Msg, Kind, Subject, Subscription string
		Dropped                          int
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if line.Kind != "slow_consumer" || line.Subject != "slow.sub" || line.Subscription != "chan" || line.Dropped < 1 {
		t.Fatalf("logged %+v, want a slow_consumer on slow.sub (chan) with messages dropped", line)
	}
	if n, _ := sub.Dropped(); n != 2 {
		t.Fatalf("dropped %d, want 2", n)
	}
	if got := counted(t, m, "slow_consumer"); got != 1 {
		t.Fatalf("baton_nats_async_errors_total{kind=slow_consumer} = %v, want 1 (counted when it starts dropping)", got)
	}
}

// counted reads the counter of kind through a registry, as /metrics would.
func counted(t *testing.T, m *ConnMetrics, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, c := range mf.GetMetric() {
			for _, l := range c.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return c.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
