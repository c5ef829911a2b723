package rolling

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/proctest"
)

const (
	// leaseTTL is the owners' lease TTL: long enough that an owner seldom
	// misses a renewal (it fences after 3.75 s without one) while a NATS
	// node restarts on a two-core machine that `make test` shares with
	// other packages' tests, short enough to keep the failover quick.
	leaseTTL = 5 * time.Second
	// wait bounds every poll: generous, for -race on two cores.
	wait = 60 * time.Second
	// adminToken is the token in the ingresses' --admin-token-file.
	adminToken = "op-rolling"
)

// world is the running topology (harness.Env: NC, JS, Names; Store once
// observed) and what the test observes of it.
type world struct {
	*harness.Env
	t          *testing.T
	h          harness.T
	nodes      *natsd.Nodes
	ownerBin   string
	ingressBin string
	logs       string // the owners' execution logs, <process>.jsonl
	adminFile  string
	client     harness.Client
	procs      *harness.Procs

	mu      sync.Mutex
	ingress map[string]string // deployment → base URL
	current atomic.Value      // base URL that traffic goes to

	tail     *harness.Tail
	records  *harness.RecordWatch
	accepted *harness.AcceptLog
	kills    []harness.Stop // the processes the test SIGKILLed, and when
}

func newWorld(t *testing.T) *world {
	t.Helper()
	h := harness.For(t)
	w := &world{
		t: t, h: h, logs: t.TempDir(), ingress: map[string]string{},
		client: harness.Client{HTTP: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
		}},
		accepted: harness.NewAcceptLog(),
	}
	w.ownerBin = proctest.BuildNoRace(t, harness.OwnerPkg)
	w.ingressBin = proctest.BuildNoRace(t, harness.IngressPkg)
	w.adminFile = filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(w.adminFile, []byte("# operators\n"+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.nodes = h.Cluster()
	w.Env = h.Dial(w.nodes.URL())
	w.procs = harness.NewProcs(t, 60)
	return w
}

// observe opens the kv store and starts the observers; it needs the
// topology, which the first owner creates.
func (w *world) observe() {
	w.t.Helper()
	w.h.Check(w.OpenStore(w.t.Context()))
	w.records = w.h.WatchRecords(w.Env)
	w.tail = w.h.TailEvents(w.Env)
}

// owner starts bin/owner as make run and compose.yaml do (R3, every
// node in --nats-url) and waits until it serves.
func (w *world) owner(dep, pid string) *proctest.Proc {
	w.t.Helper()
	args := harness.OwnerFlags(w.URL, dep, pid, w.logs, leaseTTL, "--replicas", "3")
	return w.h.OwnerProc(w.procs, "owner "+pid, w.ownerBin, args, wait)
}

// startIngress starts bin/ingress for dep with the admin routes enabled and
// waits until /readyz answers 200.
func (w *world) startIngress(dep string) *proctest.Proc {
	w.t.Helper()
	p, base := w.h.IngressProc(w.procs, "ingress "+dep, w.ingressBin, w.URL, dep, wait, "--insecure-dev", "--admin-token-file", w.adminFile)
	w.mu.Lock()
	w.ingress[dep] = base
	w.mu.Unlock()
	return p
}

func (w *world) base(dep string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ingress[dep]
}

// sigterm sends SIGTERM and wants exit code 0.
func (w *world) sigterm(name string, p *proctest.Proc) {
	w.t.Helper()
	w.h.Terminate(name, p, wait)
}

// eventually polls cond until it holds or wait passes.
func (w *world) eventually(what string, cond func() bool) {
	w.t.Helper()
	w.h.Eventually(wait, what, cond)
}

// poll is harness.Poll for goroutines other than the test's.
func poll(d time.Duration, cond func() bool) error {
	return harness.Poll(context.Background(), d, cond)
}

// ---- HTTP ----

func (w *world) do(method, url string, body any, admin bool) (int, []byte, error) {
	var opts []harness.Option
	if admin {
		opts = append(opts, harness.Bearer(adminToken))
	}
	r, err := w.client.DoJSON(context.Background(), method, url, body, opts...)
	return r.Code, r.Body, err
}

// command POSTs a command with an idempotency key to the ingress traffic
// currently goes to (or to dep's, if given), retrying transport errors and
// 503 with the same key (a retry gets the first receipt), and records the
// accepted command. want is the success status.
func (w *world) command(dep, path string, body map[string]any, admin bool, want int) (ingress.Receipt, error) {
	key, _ := body["idempotencyKey"].(string)
	deadline := time.Now().Add(wait)
	for {
		base := w.current.Load().(string)
		via := w.depOf(base)
		if dep != "" {
			base, via = w.base(dep), dep
		}
		code, b, err := w.do(http.MethodPost, base+path, body, admin)
		switch {
		case err == nil && code == want:
			var r ingress.Receipt
			if err := json.Unmarshal(b, &r); err != nil || r.Seq == 0 || r.SessionID == "" {
				return r, fmt.Errorf("POST %s: receipt %s: %v", path, b, err)
			}
			w.accepted.Add(r.SessionID, harness.Accepted{Seq: r.Seq, Key: key, What: describe(body), Via: via})
			return r, nil
		case err == nil && code != http.StatusServiceUnavailable:
			return ingress.Receipt{}, fmt.Errorf("POST %s %v: %d %s", path, body, code, b)
		}
		if time.Now().After(deadline) {
			return ingress.Receipt{}, fmt.Errorf("POST %s: still failing after %s: %d %s %v", path, wait, code, b, err)
		}
		time.Sleep(100 * time.Millisecond) // retry pacing, not synchronisation
	}
}

func describe(body map[string]any) string {
	if t, ok := body["text"].(string); ok {
		return t
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func (w *world) depOf(base string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d, b := range w.ingress {
		if b == base {
			return d
		}
	}
	return "?"
}

// drainReport reads every page of GET /v1/admin/deployments.
func (w *world) drainReport(base string) (map[string]*ingress.DeploymentReport, error) {
	return w.client.DrainReport(context.Background(), base, 500, harness.Bearer(adminToken))
}

// ---- SSE ----

// follow is an SSE client of one session: it starts at seq 0 on the
// ingress traffic goes to and, whenever its stream ends (an ingress stops),
// reconnects to the ingress traffic goes to then, with Last-Event-ID.
func (w *world) follow(ctx context.Context, sid string) *harness.Follower {
	return harness.StartFollow(ctx, harness.Follow{Session: sid, Base: func() (string, string) {
		base := w.current.Load().(string)
		return base, w.depOf(base)
	}})
}

// ---- execution logs ----

// execs reads every owner's execution log.
func (w *world) execs() []execlog.Exec {
	w.t.Helper()
	es, err := harness.ReadExecs(w.logs)
	w.h.Check(err)
	return es
}
