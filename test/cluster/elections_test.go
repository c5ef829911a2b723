package cluster_test

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsproc"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// ownersStream is the stream of the baton_owners bucket (the leases).
var ownersStream = "KV_" + subjects.Default().OwnersBucket()

// cluster is what the election measurements need of a three-node cluster:
// the process cluster (natsproc) and the in-process one (natsd.Nodes).
type cluster struct {
	name    func(i int) string
	url     func(i int) string
	fail    func(i int)               // SIGKILL or graceful stop
	restart func(t *testing.T, i int) // start node i again and wait until the cluster is ready
}

// TestElectionsKill measures, on three nats-server processes with Baton's
// R3 topology, how long each stream and bucket refuses writes after the
// node leading baton_owners (and whatever else it leads) is SIGKILLed, and
// the longest stretch without an acknowledged write on each while the node
// restarts and catches up. Figures are logged (docs/operations.md, "NATS
// server failures: elections"); a resource refusing writes for a minute
// fails the test.
func TestElectionsKill(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server processes, several elections")
	}
	c := natsproc.Start(t, t.TempDir(), 3)
	measure(t, c.URL(), cluster{
		name: c.Name,
		url:  c.NodeURL,
		fail: func(i int) {
			if err := c.Kill(i); err != nil {
				t.Fatal(err)
			}
		},
		restart: func(t *testing.T, i int) {
			if err := c.Restart(i); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitReady(60 * time.Second); err != nil {
				t.Fatal(err)
			}
		},
	}, "SIGKILL")
}

// TestElectionsGraceful is TestElectionsKill with an in-process cluster
// whose node shuts down gracefully (it hands its leaderships over), for
// comparison.
func TestElectionsGraceful(t *testing.T) {
	if testing.Short() {
		t.Skip("three in-process nats-servers, several elections")
	}
	c := natstest.RestartableCluster(t)
	var names, urls []string
	for _, s := range c.Servers() {
		names, urls = append(names, s.Name()), append(urls, s.ClientURL())
	}
	measure(t, c.URL(), cluster{
		name: func(i int) string { return names[i] },
		url:  func(i int) string { return urls[i] },
		fail: c.Stop,
		restart: func(t *testing.T, i int) {
			if err := c.Start(i, 60*time.Second); err != nil {
				t.Fatal(err)
			}
		},
	}, "graceful stop")
}

func measure(t *testing.T, url string, c cluster, how string) {
	rounds := testsize.Pick(1, 5)
	rs := resources(t, url)
	names := map[string]int{c.name(0): 0, c.name(1): 1, c.name(2): 2}
	var down, back figures
	for round := range rounds {
		_, js := natstest.Connect(t, url)
		lead := leaders(t, js, rs)
		victim := names[lead[ownersStream]]
		survivor := (victim + 1) % 3
		_, via := natstest.Connect(t, c.url(survivor)) // a client the failure does not disconnect
		var led []resource
		for _, r := range rs {
			if lead[r.stream] == c.name(victim) {
				led = append(led, r)
			}
		}
		out := outage(t, via, led, func() { c.fail(victim) })
		worst := time.Duration(0)
		for s, d := range out {
			down.add(s, d)
			worst = max(worst, d)
		}
		down.add("every stream it led", worst)
		t.Logf("round %d: %s of %s (led %d of %d streams): %v", round+1, how, c.name(victim), len(led), len(rs), out)

		stop := make(chan struct{})
		done := make(chan map[string]time.Duration)
		go func() { done <- gaps(via, rs, stop) }()
		began := time.Now()
		c.restart(t, victim)
		back.add("restart until the cluster is ready", time.Since(began))
		time.Sleep(time.Second) // writes after ready count too
		close(stop)
		g := <-done
		worst = 0
		for _, d := range g {
			worst = max(worst, d)
		}
		back.add("longest write gap of any stream", worst)
		t.Logf("round %d: restart of %s: longest write gaps %v", round+1, c.name(victim), g)
		settle(t, via, rs)
	}
	down.log(t, how+": writes refused")
	back.log(t, how+": restart")
}

// settle waits until every resource has a leader again.
func settle(t *testing.T, js jetstream.JetStream, rs []resource) {
	t.Helper()
	_ = leaders(t, js, rs)
}
