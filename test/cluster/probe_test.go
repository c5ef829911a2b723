package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/nats-io/nats.go/jetstream"
)

// attempt bounds one probe write: a write to a leaderless stream is left
// unanswered, so the probe's resolution is about this long.
const attempt = 200 * time.Millisecond

// resource is one of Baton's streams (a bucket's stream is KV_<bucket> or
// OBJ_<bucket>) with a subject a probe may write to.
type resource struct {
	stream  string
	subject string
}

// resources lists every stream of the Baton topology, R3.
func resources(t *testing.T, url string) []resource {
	t.Helper()
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := topology.Await(ctx, js, topology.Config{Replicas: 3}, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	var out []resource
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		subj := s.CachedInfo().Config.Subjects[0]
		subj = strings.ReplaceAll(strings.ReplaceAll(subj, ">", "probe"), "*", "probe")
		out = append(out, resource{stream: name, subject: subj})
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b resource) int { return strings.Compare(a.stream, b.stream) })
	if len(out) < 8 {
		t.Fatalf("topology: %d streams, want at least 8", len(out))
	}
	return out
}

// leaderName is the server name leading stream, "" when none answers
// within attempt.
func leaderName(ctx context.Context, js jetstream.JetStream, stream string) string {
	ctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// leaders maps every resource to its leader's name, polling until each has
// one.
func leaders(t *testing.T, js jetstream.JetStream, rs []resource) map[string]string {
	t.Helper()
	out := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range rs {
		for out[r.stream] == "" {
			if time.Now().After(deadline) {
				t.Fatalf("%s has no leader", r.stream)
			}
			out[r.stream] = leaderName(context.Background(), js, r.stream)
		}
	}
	return out
}

// probe writes to r until one write is acknowledged and returns when that
// was (the zero time if none was before deadline). Each write is bounded
// by attempt.
func probe(js jetstream.JetStream, r resource, deadline time.Time) time.Time {
	for n := 0; time.Now().Before(deadline); n++ {
		ctx, cancel := context.WithTimeout(context.Background(), attempt)
		_, err := js.Publish(ctx, r.subject, []byte(fmt.Sprint(n)))
		cancel()
		if err == nil {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}
}

// outage is how long each resource refuses writes after fail runs: probes
// start at once (before fail) and each returns at its first acknowledged
// write after fail began. A resource still refusing at the deadline is a
// test failure.
func outage(t *testing.T, js jetstream.JetStream, rs []resource, fail func()) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	fail()
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := probe(js, r, deadline)
			mu.Lock()
			defer mu.Unlock()
			if at.IsZero() {
				out[r.stream] = -1
				return
			}
			out[r.stream] = at.Sub(began)
		}()
	}
	wg.Wait()
	for s, d := range out {
		if d < 0 {
			t.Fatalf("%s refused every write for 60 s", s)
		}
	}
	return out
}

// gaps writes to every resource in a loop until stop is closed and
// returns each resource's longest stretch without an acknowledged write
// (from the end of the last acknowledged write to the end of the next one).
func gaps(js jetstream.JetStream, rs []resource, stop <-chan struct{}) map[string]time.Duration {
	out := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last, worst := time.Now(), time.Duration(0)
			for n := 0; ; n++ {
				select {
				case <-stop:
					mu.Lock()
					out[r.stream] = max(worst, time.Since(last))
					mu.Unlock()
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), attempt)
				_, err := js.Publish(ctx, r.subject, []byte(fmt.Sprint(n)))
				cancel()
				if err == nil {
					worst, last = max(worst, time.Since(last)), time.Now()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return out
}

// figures collects durations per series and prints min/median/max.
type figures struct {
	order []string
	by    map[string][]time.Duration
}

func (f *figures) add(series string, d time.Duration) {
	if f.by == nil {
		f.by = map[string][]time.Duration{}
	}
	if _, ok := f.by[series]; !ok {
		f.order = append(f.order, series)
	}
	f.by[series] = append(f.by[series], d)
}

func (f *figures) log(t *testing.T, title string) {
	t.Helper()
	for _, s := range f.order {
		ds := slices.Clone(f.by[s])
		slices.Sort(ds)
		r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
		t.Logf("soak: %s: %-40s n=%d min %v median %v max %v", title, s, len(ds), r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
	}
}
