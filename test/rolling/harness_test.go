package rolling

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// world is the running topology and what the test observes of it.
type world struct {
	t          *testing.T
	nodes      *natstest.Nodes
	url        string
	nc         *nats.Conn
	js         jetstream.JetStream
	store      *kv.Store
	names      subjects.Names
	ownerBin   string
	ingressBin string
	logs       string // the owners' execution logs, <process>.jsonl
	adminFile  string
	client     *http.Client

	mu      sync.Mutex
	procs   map[string]*proctest.Proc
	ingress map[string]string // deployment → base URL
	current atomic.Value      // base URL that traffic goes to

	tail     *eventTail
	records  *recordLog
	accepted *acceptLog
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{
		t: t, names: subjects.Default(), logs: t.TempDir(),
		procs: map[string]*proctest.Proc{}, ingress: map[string]string{},
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
		},
		accepted: &acceptLog{by: map[string][]accepted{}},
	}
	w.ownerBin = proctest.BuildNoRace(t, "github.com/baton-rt/baton/cmd/owner")
	w.ingressBin = proctest.BuildNoRace(t, "github.com/baton-rt/baton/cmd/ingress")
	w.adminFile = filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(w.adminFile, []byte("# operators\n"+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.nodes = natstest.RestartableCluster(t)
	w.url = w.nodes.URL()
	w.nc, w.js = natstest.Connect(t, w.url)
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("BATON_TEST_LOGS") != "1" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		dir := os.Getenv("BATON_TEST_LOGDIR") // full logs there, if set
		for name, p := range w.procs {
			t.Logf("---- %s ----\n%s", name, tail(p.Output(), 60))
			if dir != "" {
				_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log"), []byte(p.Output()), 0o644)
			}
		}
	})
	return w
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// openStore opens the kv store and starts the observers; it needs the
// topology, which the first owner creates.
func (w *world) observe() {
	w.t.Helper()
	store, err := kv.Open(w.t.Context(), w.js, w.names)
	if err != nil {
		w.t.Fatal(err)
	}
	w.store = store
	w.records = watchRecords(w.t, w.js, w.names)
	w.tail = tailEvents(w.t, w.js, w.names)
}

// owner starts bin/owner as make run and compose.yaml do (R3, every
// node in --nats-url) and waits until it serves.
func (w *world) owner(dep, pid string) *proctest.Proc {
	w.t.Helper()
	p := proctest.Start(w.t, w.ownerBin,
		"--nats-url", w.url, "--deployment-id", dep, "--process-id", pid, "--replicas", "3",
		"--exec-log", filepath.Join(w.logs, pid+".jsonl"), "--lease-ttl", leaseTTL.String(),
		"--sweep-interval", "1s", "--log-format", "json", "--log-level", "debug")
	w.mu.Lock()
	w.procs["owner "+pid] = p
	w.mu.Unlock()
	p.WaitLog(w.t, "owner serving", wait)
	return p
}

// startIngress starts bin/ingress for dep with the admin routes enabled and
// waits until /readyz answers 200.
func (w *world) startIngress(dep string) *proctest.Proc {
	w.t.Helper()
	addr := freeAddr(w.t)
	p := proctest.Start(w.t, w.ingressBin, "--deployment-id", dep, "--insecure-dev",
		"--admin-token-file", w.adminFile, "--nats-url", w.url, "--listen", addr, "--log-format", "json")
	w.mu.Lock()
	w.procs["ingress "+dep] = p
	w.mu.Unlock()
	p.WaitLog(w.t, "ingress ready", wait)
	base := "http://" + addr
	w.eventually("ingress "+dep+" ready", func() bool {
		code, _, err := w.do(http.MethodGet, base+"/readyz", nil, false)
		return err == nil && code == http.StatusOK
	})
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
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		w.t.Fatal(err)
	}
	if code := p.Wait(w.t, wait); code != 0 {
		w.t.Fatalf("%s: exit code %d after SIGTERM\n%s", name, code, tail(p.Output(), 40))
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond every 25 ms until it holds or wait passes.
func (w *world) eventually(what string, cond func() bool) {
	w.t.Helper()
	if err := poll(wait, cond); err != nil {
		w.t.Fatalf("timed out after %s waiting for %s", wait, what)
	}
}

var errTimeout = errors.New("timed out")

func poll(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errTimeout
		}
		time.Sleep(25 * time.Millisecond)
	}
	return nil
}

// ---- HTTP ----

func (w *world) do(method, url string, body any, admin bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// receipt is the ingress's answer to an accepted command.
type receipt struct {
	SessionID    string `json:"sessionId"`
	Seq          uint64 `json:"seq"`
	Created      bool   `json:"created"`
	DeploymentID string `json:"deploymentId"`
}

// accepted is a command an ingress accepted.
type accepted struct {
	Seq  uint64
	Key  string
	What string
	Via  string // deployment of the ingress that accepted it
}

type acceptLog struct {
	mu sync.Mutex
	by map[string][]accepted
}

func (a *acceptLog) add(sid string, c accepted) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.by[sid] = append(a.by[sid], c)
}

func (a *acceptLog) get(sid string) []accepted {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]accepted(nil), a.by[sid]...)
}

// command POSTs a command with an idempotency key to the ingress traffic
// currently goes to (or to dep's, if given), retrying transport errors and
// 503 with the same key (a retry gets the first receipt), and records the
// accepted command. want is the success status.
func (w *world) command(dep, path string, body map[string]any, admin bool, want int) (receipt, error) {
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
			var r receipt
			if err := json.Unmarshal(b, &r); err != nil || r.Seq == 0 || r.SessionID == "" {
				return r, fmt.Errorf("POST %s: receipt %s: %v", path, b, err)
			}
			w.accepted.add(r.SessionID, accepted{Seq: r.Seq, Key: key, What: describe(body), Via: via})
			return r, nil
		case err == nil && code != http.StatusServiceUnavailable:
			return receipt{}, fmt.Errorf("POST %s %v: %d %s", path, body, code, b)
		}
		if time.Now().After(deadline) {
			return receipt{}, fmt.Errorf("POST %s: still failing after %s: %d %s %v", path, wait, code, b, err)
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
	out := map[string]*ingress.DeploymentReport{}
	after := ""
	for {
		url := base + "/v1/admin/deployments?limit=500"
		if after != "" {
			url += "&after=" + after
		}
		code, b, err := w.do(http.MethodGet, url, nil, true)
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("drain report: %d %s %v", code, b, err)
		}
		var page ingress.DrainReport
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		for _, d := range page.Deployments {
			sum := out[d.DeploymentID]
			if sum == nil {
				sum = &ingress.DeploymentReport{DeploymentID: d.DeploymentID, Sessions: map[string]int{}}
				out[d.DeploymentID] = sum
			}
			sum.Retired = d.Retired
			for k, v := range d.Sessions {
				sum.Sessions[k] += v
			}
			sum.Idle += d.Idle
			sum.NotIdle = append(sum.NotIdle, d.NotIdle...)
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// live counts the sessions of a report that have not ended.
func live(d *ingress.DeploymentReport) int {
	if d == nil {
		return 0
	}
	n := 0
	for state, c := range d.Sessions {
		if state != string(record.StateEnded) {
			n += c
		}
	}
	return n
}

// ---- observers ----

// eventTail reads every session's events from BATON_EVENTS with one ordered
// consumer for the whole run.
type eventTail struct {
	mu      sync.Mutex
	evs     map[string][]wire.Event
	applied map[string]map[uint64]int // session → inbox seq → command.applied count
}

func tailEvents(t *testing.T, js jetstream.JetStream, names subjects.Names) *eventTail {
	t.Helper()
	et := &eventTail{evs: map[string][]wire.Event{}, applied: map[string]map[uint64]int{}}
	cons, err := js.OrderedConsumer(t.Context(), names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.EventsAll()},
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := wire.DecodeEvent(nil, m.Data())
		if err != nil {
			t.Errorf("event on %s does not decode: %v", m.Subject(), err)
			return
		}
		et.mu.Lock()
		defer et.mu.Unlock()
		et.evs[ev.SessionID] = append(et.evs[ev.SessionID], ev)
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Errorf("command.applied %s: %v", ev.Data, err)
				return
			}
			if et.applied[ev.SessionID] == nil {
				et.applied[ev.SessionID] = map[uint64]int{}
			}
			et.applied[ev.SessionID][d.Seq]++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return et
}

func (et *eventTail) events(sid string) []wire.Event {
	et.mu.Lock()
	defer et.mu.Unlock()
	return append([]wire.Event(nil), et.evs[sid]...)
}

func (et *eventTail) isApplied(sid string, seq uint64) bool {
	et.mu.Lock()
	defer et.mu.Unlock()
	return et.applied[sid][seq] > 0
}

// waitApplied polls until the command at inbox seq is applied.
func (et *eventTail) waitApplied(sid string, seq uint64) error {
	if err := poll(wait, func() bool { return et.isApplied(sid, seq) }); err != nil {
		return fmt.Errorf("command seq %d of %s not applied within %s; events %s", seq, sid, wait, kinds(et.events(sid)))
	}
	return nil
}

// find returns the first event of kind after index from whose data pred
// accepts (pred nil: any).
func find(evs []wire.Event, kind string, pred func(json.RawMessage) bool) (wire.Event, bool) {
	for _, e := range evs {
		if e.Kind == kind && (pred == nil || pred(e.Data)) {
			return e, true
		}
	}
	return wire.Event{}, false
}

func kinds(evs []wire.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%s@%s ", e.Seq, e.Kind, e.DeploymentID)
	}
	return b.String()
}

// recordLog is every revision of every session record, from a watcher on
// baton_sessions started before the first session.
type recordLog struct {
	mu  sync.Mutex
	by  map[string][]recordRev
	bad []string
}

type recordRev struct {
	Rev     uint64
	At      time.Time
	Deleted bool
	Rec     record.SessionRecord
}

func watchRecords(t *testing.T, js jetstream.JetStream, names subjects.Names) *recordLog {
	t.Helper()
	b, err := js.KeyValue(t.Context(), names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	kw, err := b.WatchAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rl := &recordLog{by: map[string][]recordRev{}}
	go func() {
		for e := range kw.Updates() {
			if e == nil {
				continue
			}
			r := recordRev{Rev: e.Revision(), At: time.Now(), Deleted: e.Operation() != jetstream.KeyValuePut}
			if !r.Deleted {
				if err := json.Unmarshal(e.Value(), &r.Rec); err != nil {
					rl.mu.Lock()
					rl.bad = append(rl.bad, fmt.Sprintf("%s rev %d: %v", e.Key(), e.Revision(), err))
					rl.mu.Unlock()
					continue
				}
			}
			rl.mu.Lock()
			rl.by[e.Key()] = append(rl.by[e.Key()], r)
			rl.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = kw.Stop() })
	return rl
}

// latest is the last record revision seen for sid.
func (rl *recordLog) latest(sid string) (record.SessionRecord, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	revs := rl.by[sid]
	if len(revs) == 0 || revs[len(revs)-1].Deleted {
		return record.SessionRecord{}, false
	}
	return revs[len(revs)-1].Rec, true
}

func (rl *recordLog) history(sid string) []recordRev {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return append([]recordRev(nil), rl.by[sid]...)
}

// on reports whether sid's latest record is an active session of dep.
func (rl *recordLog) on(sid, dep string) bool {
	r, ok := rl.latest(sid)
	return ok && r.DeploymentID == dep && r.State == record.StateActive
}

// ---- SSE ----

// follower is an SSE client of one session: it starts at seq 0 on the
// ingress traffic goes to and, whenever its stream ends (an ingress stops),
// reconnects to the ingress traffic goes to then, with Last-Event-ID.
type follower struct {
	sid      string
	mu       sync.Mutex
	evs      []wire.Event
	connects []string // deployment of each connection's ingress
	problems []string
	done     chan struct{}
}

func (w *world) follow(ctx context.Context, sid string) *follower {
	f := &follower{sid: sid, done: make(chan struct{})}
	client := &http.Client{} // no timeout: the stream is long-lived
	go func() {
		defer close(f.done)
		for ctx.Err() == nil {
			base := w.current.Load().(string)
			f.mu.Lock()
			last := uint64(len(f.evs))
			f.connects = append(f.connects, w.depOf(base))
			f.mu.Unlock()
			err := f.stream(ctx, client, base, last)
			if ctx.Err() != nil {
				return
			}
			_ = err                             // a stream ends when its ingress stops or NATS hiccups: resume
			sleepCtx(ctx, 100*time.Millisecond) // reconnect pacing, as an EventSource's retry
		}
	}()
	return f
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (f *follower) stream(ctx context.Context, client *http.Client, base string, last uint64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+f.sid+"/events", nil)
	if err != nil {
		return err
	}
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("SSE %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, kind, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				f.add(id, kind, data)
			}
			id, kind, data = "", "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return sc.Err()
}

func (f *follower) add(id, kind, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, err := wire.DecodeEvent(nil, []byte(data))
	if err != nil {
		f.problems = append(f.problems, fmt.Sprintf("id %s: data does not decode: %v", id, err))
		return
	}
	want := uint64(len(f.evs) + 1)
	if id != strconv.FormatUint(ev.Seq, 10) || kind != ev.Kind || ev.Seq != want {
		f.problems = append(f.problems, fmt.Sprintf("got id %s event %s (envelope seq %d kind %s), want seq %d", id, kind, ev.Seq, ev.Kind, want))
		return
	}
	f.evs = append(f.evs, ev)
}

func (f *follower) snapshot() ([]wire.Event, []string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Event(nil), f.evs...), append([]string(nil), f.connects...), append([]string(nil), f.problems...)
}

// ---- execution logs ----

// execs reads every owner's execution log.
func (w *world) execs() []runtime.Exec {
	w.t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.logs, "*.jsonl"))
	var out []runtime.Exec
	for _, f := range files {
		es, err := demo.ReadFileLog(f)
		if err != nil && !os.IsNotExist(err) {
			w.t.Fatal(err)
		}
		out = append(out, es...)
	}
	return out
}

// explain is sid's record history, for failure messages.
func (w *world) explain(sid string) string {
	var b strings.Builder
	for _, h := range w.records.history(sid) {
		r := h.Rec
		ho := ""
		if r.Handoff != nil {
			ho = fmt.Sprintf(" handoff %s→%s %s/%s", r.Handoff.ID, r.Handoff.Target, r.Handoff.Outcome, r.Handoff.Step)
		}
		fmt.Fprintf(&b, "\n  rev %d %s: %s/%s epoch %d run %s state %s writer %s#%d%s",
			h.Rev, h.At.Format("15:04:05.000"), r.DeploymentID, r.OwnerProcess, r.Epoch, r.OwnerRunID, r.State, r.Writer, r.WriteCounter, ho)
	}
	return b.String()
}
