package chaos

import (
	"context"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// leaseTTL is the owners' lease TTL.
	leaseTTL = 2 * time.Second
	// wait bounds every poll and every restart: generous, for -race on
	// two shared cores.
	wait = 60 * time.Second
)

// cluster is the NATS cluster the test kills nodes of.
type cluster interface {
	URL() string
	N() int
	// Kill ends node i abruptly and waits for it to be gone.
	Kill(i int) error
	// Restart starts the stopped node i again with its store and ports.
	Restart(i int) error
	// WaitReady waits until every running node is current.
	WaitReady(timeout time.Duration) error
	// Leader is the index of the node leading stream.
	Leader(ctx context.Context, js jetstream.JetStream, stream string) (int, error)
}

// owner is one owner process slot: its process ID and its current run
// (incarnation) of bin/owner.
type owner struct {
	dep, pid string
	mu       sync.Mutex
	proc     *proctest.Proc
	inc      int  // incarnation number, from 1
	busy     bool // a fault is acting on it
}

// name is the incarnation's name, e.g. blue-1#2: its execution log and its
// key in the cut-short set.
func (o *owner) name() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%s#%d", o.pid, o.inc)
}

func (o *owner) current() *proctest.Proc {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proc
}

// world is the running topology and what the test observes of it.
type world struct {
	*harness.Env
	t          *testing.T
	h          harness.T
	nats       cluster
	ownerBin   string
	ingressBin string
	logs       string // execution logs, <pid>#<incarnation>.jsonl
	client     harness.Client
	procs      *harness.Procs
	ingress    map[string]string // deployment → base URL
	owners     []*owner
	began      time.Time

	tail     *harness.Tail
	records  *harness.RecordWatch
	accepted *harness.AcceptLog

	mu        sync.Mutex
	kills     []harness.Stop // incarnations SIGKILLed, and when
	freezes   []freeze       // incarnations SIGSTOPped, and when
	elections []span         // NATS kills until the streams they left leaderless had leaders
	// owner faults: a freeze until a lease TTL after the thaw, a SIGKILL or
	// SIGTERM until its restart serves or a lease TTL passed, whichever
	// is later (a peer's takeover waits for the lease to expire)
	ownerFaults []span
	// NATS kills until the node is current again and every stream it led
	// has a leader
	natsFaults []span
	faults     []string // what struck when, for the report
	errs       []string // errors of goroutines other than the test's
}

func newWorld(t *testing.T, nats cluster) *world {
	t.Helper()
	h := harness.For(t)
	w := &world{
		t: t, h: h, nats: nats, logs: t.TempDir(), ingress: map[string]string{}, began: time.Now(),
		client: harness.Client{HTTP: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
		}},
		accepted: harness.NewAcceptLog(),
	}
	w.ownerBin = proctest.BuildNoRace(t, harness.OwnerPkg)
	w.ingressBin = proctest.BuildNoRace(t, harness.IngressPkg)
	w.Env = h.Dial(nats.URL())
	w.procs = harness.NewProcs(t, 80)
	return w
}

// fail records an error of a goroutine other than the test's; check
// reports them.
func (w *world) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
}

// note records a fault (or the end of one) with its time since the start.
func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf("%7s ", time.Since(w.began).Round(100*time.Millisecond)) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = append(w.faults, line)
}

// startOwner starts the next incarnation of o (R3, every node in
// --nats-url, its own execution log) and waits until it serves.
func (w *world) startOwner(o *owner) error {
	o.mu.Lock()
	o.inc++
	name := fmt.Sprintf("%s#%d", o.pid, o.inc)
	o.mu.Unlock()
	args := harness.OwnerFlags(w.URL, o.dep, o.pid, w.logs, leaseTTL, "--replicas", "3",
		"--exec-log", filepath.Join(w.logs, name+".jsonl"))
	p, err := proctest.Launch(w.t, w.ownerBin, args...)
	if err != nil {
		return fmt.Errorf("start owner %s: %w", name, err)
	}
	w.procs.Add("owner "+name, p)
	o.mu.Lock()
	o.proc = p
	o.mu.Unlock()
	err = harness.Poll(context.Background(), wait, func() bool {
		select {
		case <-p.Done():
			return true
		default:
		}
		return p.Contains(`"msg":"owner serving"`)
	})
	if err != nil || !p.Contains(`"msg":"owner serving"`) {
		return fmt.Errorf("owner %s does not serve (%v):\n%s", name, err, harness.LastLines(p.Output(), 30))
	}
	return nil
}

// startIngress starts bin/ingress for dep and waits until it is ready.
func (w *world) startIngress(dep string) {
	w.t.Helper()
	_, base := w.h.IngressProc(w.procs, "ingress "+dep, w.ingressBin, w.URL, dep, wait, "--insecure-dev")
	w.ingress[dep] = base
}

// observe opens the kv store and starts the observers; it needs the
// topology, which the first owner creates.
func (w *world) observe() {
	w.t.Helper()
	w.h.Check(w.OpenStore(w.t.Context()))
	w.records = w.h.WatchRecords(w.Env)
	w.tail = w.h.TailEvents(w.Env)
}

// signal sends sig to o's current incarnation.
func (w *world) signal(o *owner, sig syscall.Signal) error {
	return harness.Signal(o.current(), sig)
}

// execs reads every incarnation's execution log, each line's Process set
// to the incarnation's name.
func (w *world) execs() []execlog.Exec {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.logs, "*.jsonl"))
	w.h.Check(err)
	var out []execlog.Exec
	for _, f := range files {
		es, err := execlog.ReadFileLog(f)
		if err != nil && !os.IsNotExist(err) {
			w.t.Fatal(err)
		}
		inc := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		for _, e := range es {
			e.Process = inc
			out = append(out, e)
		}
	}
	return out
}

// freeze is an incarnation the test froze: from is taken before SIGSTOP,
// to before SIGCONT (nothing is logged in between: the process is frozen).
type freeze struct {
	name     string
	from, to time.Time
}

// stops are the stops of every incarnation's runs: its SIGKILL, the
// fences and stopped sessions its own log shows, each with its time, and
// those it logged at the thaw of a freeze (harness.ThawStops), from the
// freeze on.
func (w *world) stops() []harness.Stop {
	w.mu.Lock()
	out := slices.Clone(w.kills)
	freezes := slices.Clone(w.freezes)
	w.mu.Unlock()
	all := w.procs.All()
	for _, f := range freezes {
		for _, p := range all["owner "+f.name] {
			out = append(out, harness.ThawStops(f.name, p.Output(), f.from, f.to)...)
		}
	}
	return append(out, w.procs.OwnerStops()...)
}
