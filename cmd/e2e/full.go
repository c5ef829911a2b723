package main

// -scenario full (`make e2e`, the full rolling upgrade): the whole
// runbook of docs/operations.md against the compose stack with the e2e
// override (deploy/compose.e2e.yaml), under steady traffic, with faults:
//
//  1. record, before any traffic: every revision of baton_sessions (a KV
//     watcher), the owners' step logs (--exec-log files on the host, tailed
//     every 50 ms), a few SSE streams on green's ingress from seq 0;
//  2. create -sessions sessions on blue through blue's ingress, of five
//     kinds: busy (/sleep 2s), hitl (/ask, then left waiting), task
//     (/task 1s), plain (text), quiet (one message, then nothing);
//  3. traffic (busy, task, plain) on blue's ingress for -blue-traffic, then
//     on green's: idle sessions move on their next delivery, busy ones on a
//     later delivery that finds them idle; the drain report is polled and
//     printed until blue holds only the hitl and quiet sessions;
//  4. retire blue; force-move the hitl sessions; SIGTERM both blue owners
//     (each must drain and exit 0); force-move again whatever hitl session
//     a live blue owner skipped; one delivery to each quiet session through
//     green (adopted from retired blue);
//  5. faults on green with the traffic running: SIGKILL green-2 (green-1
//     adopts its sessions after the lease TTL; green-2 is started again
//     afterwards), stop and restart nats3, cut green-1 off the network for
//     5 × the lease TTL;
//  6. stop the traffic, wait until every session is idle on green, then
//     check (see checkAll) and print the figures.
//
// Restart policy: compose.yaml restarts owners (unless-stopped). An owner
// killed on purpose first gets `docker update --restart=no`, so Docker does
// not restart it behind the scenario's back: the blue owners stay down (the
// upgrade retires them), green-2 is started again by the scenario once
// green-1 has adopted its sessions, so the failover measured is the peer's
// adoption by lease expiry, not a restart of the same process ID.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type fullConfig struct {
	adminTokenFile string
	execLogDir     string
	leaseTTL       time.Duration
	blueTraffic    time.Duration
	sseStreams     int
}

type kind int

const (
	kBusy kind = iota
	kHITL
	kTask
	kPlain
	kQuiet
)

var kindNames = []string{"busy", "hitl", "task", "plain", "quiet"}

// kindOf spreads the kinds: 3/10 busy, 2/10 hitl, 2/10 task, 2/10 plain, 1/10 quiet.
func kindOf(i int) kind {
	switch i % 10 {
	case 0, 1, 2:
		return kBusy
	case 3, 4:
		return kHITL
	case 5, 6:
		return kTask
	case 7, 8:
		return kPlain
	}
	return kQuiet
}

type accepted struct {
	seq  uint64
	what string // "create", "deliver", "move"
	dep  string // the receipt's stamp
}

type fsess struct {
	i    int
	id   string
	kind kind
	mu   sync.Mutex
	acc  []accepted
}

func (s *fsess) add(a accepted) {
	s.mu.Lock()
	s.acc = append(s.acc, a)
	s.mu.Unlock()
}

type full struct {
	c       config
	f       fullConfig
	compose string
	token   string
	nc      *nats.Conn
	js      jetstream.JetStream
	start   time.Time

	sessions []*fsess
	byID     map[string]*fsess
	toGreen  atomic.Bool
	stop     chan struct{}
	traffic  sync.WaitGroup
	failed   atomic.Int64 // deliveries refused after retries (not counted as accepted)

	cids map[string]string // compose service → container ID, resolved once

	kvr  *kvRecorder
	exec *execTailer
	sse  []*sseStream

	figures []string
	notes   []string

	// fault windows (host clock; containers share it)
	killAt, cutAt, reconnectAt time.Time
	greenRunsBeforeCut         map[string]bool
}

func (f *full) figure(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	f.figures = append(f.figures, s)
	log.Printf("FIGURE %s", s)
}

func (f *full) note(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	f.notes = append(f.notes, s)
	log.Printf("NOTE %s", s)
}

func (f *full) since() string { return fmt.Sprintf("t+%5.1fs", time.Since(f.start).Seconds()) }

func runFull(ctx context.Context, c config, fc fullConfig) error {
	f := &full{c: c, f: fc, compose: os.Getenv("COMPOSE"), stop: make(chan struct{}), byID: map[string]*fsess{}, start: time.Now()}
	if f.compose == "" {
		return errors.New("-scenario full needs COMPOSE (the compose command with project and files; make e2e sets it)")
	}
	b, err := os.ReadFile(fc.adminTokenFile)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			f.token = l
			break
		}
	}
	for _, base := range []string{c.blue, c.green} {
		if err := waitReady(ctx, base); err != nil {
			return err
		}
	}
	f.nc, err = nats.Connect(c.natsURL+",nats://baton:baton@127.0.0.1:14223,nats://baton:baton@127.0.0.1:14224",
		nats.Name("baton-e2e-full"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer f.nc.Close()
	if f.js, err = jetstream.New(f.nc); err != nil {
		return err
	}
	if err := f.waitOwners(ctx); err != nil {
		return err
	}
	if err := f.resolveContainers(ctx); err != nil {
		return err
	}
	log.Printf("%s stack ready: both ingresses, four owner leases", f.since())

	// 1. Recorders first.
	if f.kvr, err = startKVRecorder(ctx, f.js); err != nil {
		return err
	}
	f.exec = startExecTailer(ctx, fc.execLogDir, []string{"blue-1", "blue-2", "green-1", "green-2"})

	// 2. Sessions on blue.
	if err := f.createSessions(ctx); err != nil {
		return err
	}
	sseCtx, sseCancel := context.WithCancel(ctx)
	defer sseCancel()
	f.startSSE(sseCtx)

	// 3. Traffic: blue, then green; the drain report.
	for _, s := range f.sessions {
		if s.kind == kBusy || s.kind == kTask || s.kind == kPlain {
			f.traffic.Add(1)
			go f.drive(ctx, s)
		}
	}
	log.Printf("%s traffic on blue's ingress for %v", f.since(), fc.blueTraffic)
	sleepCtx(ctx, fc.blueTraffic)
	f.toGreen.Store(true)
	switched := time.Now()
	log.Printf("%s traffic moved to green's ingress", f.since())
	if err := f.waitDrained(ctx, switched); err != nil {
		return err
	}

	// 4. Retire, forced moves, SIGTERM, adoption.
	if err := f.retireAndStopBlue(ctx); err != nil {
		return err
	}

	// 5. Faults on green, traffic running.
	if err := f.killGreen2(ctx); err != nil {
		return err
	}
	if err := f.restartNATSNode(ctx); err != nil {
		return err
	}
	if err := f.partitionGreen1(ctx); err != nil {
		return err
	}
	sleepCtx(ctx, 5*time.Second)

	// 6. Quiesce and check.
	close(f.stop)
	f.traffic.Wait()
	log.Printf("%s traffic stopped (%d deliveries refused after retries)", f.since(), f.failed.Load())
	if err := f.waitQuiet(ctx); err != nil {
		return err
	}
	errs := f.checkAll(ctx)
	sseCancel()
	for _, p := range []string{"owner-blue-1", "owner-blue-2", "owner-green-1", "owner-green-2"} {
		if cid := f.cids[p]; cid != "" {
			n := countLog(ctx, cid, f.start, "fenced: stopping every session")
			f.figure("%s fenced itself %d times during the run (lease not renewed within TTL−TTL/4, including the partition)", p, n)
		}
	}
	log.Printf("---- figures ----")
	for _, s := range f.figures {
		log.Printf("  %s", s)
	}
	for _, s := range f.notes {
		log.Printf("  note: %s", s)
	}
	return errors.Join(errs...)
}

// ---- stack helpers ----

func (f *full) dc(ctx context.Context, args string) (string, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", f.compose+" "+args).Output()
	return strings.TrimSpace(string(out)), err
}

func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

var services = []string{"nats1", "nats2", "nats3", "owner-blue-1", "owner-blue-2", "owner-green-1", "owner-green-2", "ingress-blue", "ingress-green"}

// resolveContainers looks every service's container up once (docker-compose
// 1.29 takes seconds per call on a loaded machine).
func (f *full) resolveContainers(ctx context.Context) error {
	f.cids = map[string]string{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, svc := range services {
		wg.Go(func() {
			id, err := f.dc(ctx, "ps -q "+svc)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || id == "" {
				errs = append(errs, fmt.Errorf("container of %s: %q %v", svc, id, err))
				return
			}
			f.cids[svc] = id
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *full) container(_ context.Context, svc string) (string, error) {
	id := f.cids[svc]
	if id == "" {
		return "", fmt.Errorf("no container for %s", svc)
	}
	return id, nil
}

// parallel runs fn for every session of list, n at a time.
func parallel(list []*fsess, n int, fn func(*fsess) error) error {
	sem := make(chan struct{}, n)
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = fn(s)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// countLog counts an owner's log lines with msg since t.
func countLog(ctx context.Context, cid string, t time.Time, msg string) int {
	n := 0
	for _, m := range ownerLog(ctx, cid, t) {
		if m["msg"] == msg && !logTime(m).Before(t) {
			n++
		}
	}
	return n
}

// ownerLog returns the JSON log lines of an owner container since t.
func ownerLog(ctx context.Context, cid string, t time.Time) []map[string]any {
	out, _ := exec.CommandContext(ctx, "docker", "logs", "--since", t.Add(-time.Second).Format(time.RFC3339Nano), cid).CombinedOutput()
	var lines []map[string]any
	for _, l := range strings.Split(string(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

func logTime(m map[string]any) time.Time {
	s, _ := m["time"].(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// waitLogSince waits for an owner log line with msg after t.
func waitLogSince(ctx context.Context, cid string, t time.Time, msg string, d time.Duration) (time.Time, bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		for _, m := range ownerLog(ctx, cid, t) {
			if m["msg"] == msg && !logTime(m).Before(t) {
				return logTime(m), true
			}
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	return time.Time{}, false
}

func (f *full) waitOwners(ctx context.Context) error {
	kv, err := f.js.KeyValue(ctx, "baton_owners")
	for err != nil {
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return err
		}
		kv, err = f.js.KeyValue(ctx, "baton_owners")
	}
	for {
		n := 0
		for _, p := range []string{"blue-1", "blue-2", "green-1", "green-2"} {
			if _, err := kv.Get(ctx, "lease."+p); err == nil {
				n++
			}
		}
		if n == 4 {
			return nil
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return fmt.Errorf("owner leases: %d of 4: %w", n, ctx.Err())
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// ---- HTTP ----

func (f *full) admin(ctx context.Context, method, url string, body any, want int, out any) error {
	return callH(ctx, method, url, map[string]string{"Authorization": "Bearer " + f.token}, body, want, out)
}

func callH(ctx context.Context, method, url string, hdr map[string]string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return &httpError{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// retryLong repeats f on transport errors and 5xx for up to d (a NATS node
// restarting, an owner being adopted): the same idempotency key makes a
// repeat safe.
func retryLong(ctx context.Context, d time.Duration, fn func() error) error {
	end := time.Now().Add(d)
	for {
		err := fn()
		var he *httpError
		if err == nil || errors.As(err, &he) && he.code < 500 || time.Now().After(end) {
			return err
		}
		if !sleepCtx(ctx, 300*time.Millisecond) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

// ---- sessions and traffic ----

func (f *full) createSessions(ctx context.Context) error {
	n := f.c.sessions
	f.sessions = make([]*fsess, n)
	run := time.Now().UnixNano()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for i := range work {
				k := kindOf(i)
				text := map[kind]string{kBusy: "/sleep 2s", kHITL: "/ask favourite colour?", kTask: "/task 1s", kPlain: "hello", kQuiet: "hello"}[k]
				body := map[string]any{"alias": fmt.Sprintf("e2e-full-%d-%d", run, i), "text": text}
				var r receipt
				if err := retryLong(ctx, 30*time.Second, func() error { return call(ctx, "POST", f.c.blue+"/v1/sessions", body, http.StatusCreated, &r) }); err != nil {
					errs <- fmt.Errorf("create session %d: %w", i, err)
					continue
				}
				if r.DeploymentID != f.c.blueID || !r.Created || r.Seq == 0 {
					errs <- fmt.Errorf("create session %d: receipt %+v", i, r)
					continue
				}
				s := &fsess{i: i, id: r.SessionID, kind: k}
				s.add(accepted{seq: r.Seq, what: "create", dep: r.DeploymentID})
				f.sessions[i] = s
			}
		})
	}
	t0 := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(func(yield func(error) bool) {
		for e := range errs {
			if !yield(e) {
				return
			}
		}
	})...); err != nil {
		return err
	}
	for _, s := range f.sessions {
		f.byID[s.id] = s
	}
	counts := map[kind]int{}
	for _, s := range f.sessions {
		counts[s.kind]++
	}
	log.Printf("%s %d sessions created on %s in %v (busy %d, hitl %d, task %d, plain %d, quiet %d)", f.since(), n, f.c.blueID,
		time.Since(t0).Round(time.Millisecond), counts[kBusy], counts[kHITL], counts[kTask], counts[kPlain], counts[kQuiet])
	return nil
}

// deliver sends one delivery with an idempotency key, retrying on 5xx and
// transport errors, and records the receipt.
func (f *full) deliver(ctx context.Context, s *fsess, base, text, key string) error {
	body := map[string]any{"sessionId": s.id, "text": text, "idempotencyKey": key}
	var r receipt
	err := retryLong(ctx, 45*time.Second, func() error { return call(ctx, "POST", base+"/v1/deliveries", body, http.StatusAccepted, &r) })
	if err != nil {
		f.failed.Add(1)
		return fmt.Errorf("session %d (%s) delivery %s: %w", s.i, s.id, key, err)
	}
	s.add(accepted{seq: r.Seq, what: "deliver", dep: r.DeploymentID})
	return nil
}

// drive is a session's steady traffic: one delivery every 2–5 s through
// whichever ingress takes the traffic, until the traffic stops.
func (f *full) drive(ctx context.Context, s *fsess) {
	defer f.traffic.Done()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-f.stop:
			return
		case <-time.After(2*time.Second + rand.N(3*time.Second)):
		}
		base := f.c.blue
		if f.toGreen.Load() {
			base = f.c.green
		}
		text := map[kind]string{kBusy: "/sleep 2s", kTask: "/task 1s"}[s.kind]
		if text == "" {
			text = fmt.Sprintf("m%d", n)
		}
		if err := f.deliver(ctx, s, base, text, fmt.Sprintf("%s-%d", s.id, n)); err != nil && ctx.Err() == nil {
			log.Printf("%s delivery refused: %v", f.since(), err)
		}
	}
}

// ---- drain report ----

type drainReport struct {
	Deployments []struct {
		DeploymentID string         `json:"deploymentId"`
		Retired      bool           `json:"retired"`
		Sessions     map[string]int `json:"sessions"`
		Idle         int            `json:"idle"`
		NotIdle      []struct {
			SessionID string `json:"sessionId"`
			State     string `json:"state"`
			Why       string `json:"why"`
		} `json:"notIdle"`
	} `json:"deployments"`
	Next string `json:"next"`
}

type depSummary struct {
	retired bool
	states  map[string]int
	idle    int
	why     map[string]int
	total   int
}

func (f *full) report(ctx context.Context) (map[string]*depSummary, error) {
	out := map[string]*depSummary{}
	after := ""
	for {
		url := f.c.green + "/v1/admin/deployments?limit=5000"
		if after != "" {
			url += "&after=" + after
		}
		var r drainReport
		if err := f.admin(ctx, "GET", url, nil, http.StatusOK, &r); err != nil {
			return nil, err
		}
		for _, d := range r.Deployments {
			s := out[d.DeploymentID]
			if s == nil {
				s = &depSummary{states: map[string]int{}, why: map[string]int{}}
				out[d.DeploymentID] = s
			}
			s.retired = d.Retired
			for k, v := range d.Sessions {
				s.states[k] += v
				if k != "ended" {
					s.total += v
				}
			}
			s.idle += d.Idle
			for _, n := range d.NotIdle {
				s.why[n.Why]++
			}
		}
		if r.Next == "" {
			return out, nil
		}
		after = r.Next
	}
}

func (s *depSummary) String() string {
	if s == nil {
		return "none"
	}
	keys := func(m map[string]int) string {
		var ks []string
		for k, v := range m {
			if v > 0 {
				ks = append(ks, fmt.Sprintf("%s=%d", k, v))
			}
		}
		sort.Strings(ks)
		return strings.Join(ks, " ")
	}
	r := ""
	if s.retired {
		r = " RETIRED"
	}
	return fmt.Sprintf("%d sessions (%s) idle=%d notIdle{%s}%s", s.total, keys(s.states), s.idle, keys(s.why), r)
}

// waitDrained polls the drain report every 2 s and prints it, until blue
// holds only the sessions that cannot or will not move by delivery: the
// hitl ones (why=input) and the quiet ones (idle, no traffic).
func (f *full) waitDrained(ctx context.Context, switched time.Time) error {
	want := 0
	for _, s := range f.sessions {
		if s.kind == kHITL || s.kind == kQuiet {
			want++
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rep, err := f.report(ctx)
		if err != nil {
			log.Printf("%s drain report: %v", f.since(), err)
		} else {
			b := rep[f.c.blueID]
			log.Printf("%s drain report: blue %v | green %v", f.since(), b, rep[f.c.greenID])
			if b != nil && b.total <= want && b.why["busy"]+b.why["queued"]+b.why["task"] == 0 {
				d := time.Since(switched)
				f.figure("time to drain (traffic switch → blue holds only its %d hitl+quiet sessions): %v", want, d.Round(100*time.Millisecond))
				return nil
			}
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 2*time.Second) {
			return fmt.Errorf("blue never drained to its hitl and quiet sessions (last report: %v)", err)
		}
	}
}

// ---- retire, forced moves, SIGTERM, adoption ----

func (f *full) ofKind(k kind) []*fsess {
	var out []*fsess
	for _, s := range f.sessions {
		if s.kind == k {
			out = append(out, s)
		}
	}
	return out
}

func (f *full) onDeployment(list []*fsess, dep string) (on, off []*fsess) {
	for _, s := range list {
		if r, ok := f.kvr.latest(s.id); ok && r.DeploymentID == dep {
			on = append(on, s)
		} else {
			off = append(off, s)
		}
	}
	return on, off
}

func (f *full) forceMove(ctx context.Context, list []*fsess, round int) error {
	return parallel(list, 8, func(s *fsess) error {
		var r struct {
			receipt
			Force bool `json:"force"`
		}
		body := map[string]any{"deploymentId": f.c.greenID, "force": true, "idempotencyKey": fmt.Sprintf("force-%d-%s", round, s.id)}
		err := retryLong(ctx, 30*time.Second, func() error {
			return f.admin(ctx, "POST", f.c.green+"/v1/admin/sessions/"+s.id+"/move", body, http.StatusAccepted, &r)
		})
		if err != nil {
			return fmt.Errorf("forced move of session %d (%s): %w", s.i, s.id, err)
		}
		s.add(accepted{seq: r.Seq, what: "move", dep: r.DeploymentID})
		return nil
	})
}

// waitOn waits until every session of list is on dep per the KV watcher.
func (f *full) waitOn(ctx context.Context, list []*fsess, dep string, d time.Duration) []*fsess {
	end := time.Now().Add(d)
	for {
		_, off := f.onDeployment(list, dep)
		if len(off) == 0 || time.Now().After(end) || !sleepCtx(ctx, 250*time.Millisecond) {
			return off
		}
	}
}

func (f *full) retireAndStopBlue(ctx context.Context) error {
	var rr struct {
		Retired   bool   `json:"retired"`
		RetiredAt string `json:"retiredAt"`
		Changed   bool   `json:"changed"`
	}
	if err := f.admin(ctx, "POST", f.c.green+"/v1/admin/deployments/"+f.c.blueID+"/retire", nil, http.StatusOK, &rr); err != nil {
		return fmt.Errorf("retire blue: %w", err)
	}
	if !rr.Retired || !rr.Changed {
		return fmt.Errorf("retire blue: %+v", rr)
	}
	log.Printf("%s blue retired at %s", f.since(), rr.RetiredAt)

	hitl := f.ofKind(kHITL)
	t0 := time.Now()
	if err := f.forceMove(ctx, hitl, 1); err != nil {
		return err
	}
	notMoved := f.waitOn(ctx, hitl, f.c.greenID, 8*time.Second)
	log.Printf("%s forced moves with the blue owners running: %d of %d hitl sessions moved in %v, %d still on blue",
		f.since(), len(hitl)-len(notMoved), len(hitl), time.Since(t0).Round(100*time.Millisecond), len(notMoved))
	if len(notMoved) > 0 {
		// A live owner cancels the waits and hands off (wait.cancelled on
		// blue); give a loaded machine more time before failing.
		if notMoved = f.waitOn(ctx, notMoved, f.c.greenID, 45*time.Second); len(notMoved) > 0 {
			return fmt.Errorf("%d of %d hitl sessions not on green 45 s after a forced move with their blue owner live (e.g. %s)",
				len(notMoved), len(hitl), notMoved[0].id)
		}
	}

	// SIGTERM both blue owners: each drains and exits 0.
	type stopped struct {
		svc  string
		code string
		took time.Duration
		err  error
	}
	res := make([]stopped, 2)
	var wg sync.WaitGroup
	for i, svc := range []string{"owner-blue-1", "owner-blue-2"} {
		wg.Go(func() {
			res[i].svc = svc
			cid, err := f.container(ctx, svc)
			if err != nil {
				res[i].err = err
				return
			}
			if _, err := docker(ctx, "update", "--restart=no", cid); err != nil {
				res[i].err = err
				return
			}
			t := time.Now()
			if _, err := docker(ctx, "kill", "-s", "SIGTERM", cid); err != nil {
				res[i].err = err
				return
			}
			res[i].code, res[i].err = docker(ctx, "wait", cid)
			res[i].took = time.Since(t)
		})
	}
	wg.Wait()
	for _, r := range res {
		if r.err != nil {
			return r.err
		}
		if r.code != "0" {
			return fmt.Errorf("%s exited %s after SIGTERM, want 0 (a drained exit)", r.svc, r.code)
		}
		f.figure("%s: SIGTERM → drained, exit 0 in %v", r.svc, r.took.Round(10*time.Millisecond))
	}

	// Whatever hitl session a live blue owner skipped: force again, now adopted.
	_, off := f.onDeployment(hitl, f.c.greenID)
	if len(off) > 0 {
		t1 := time.Now()
		if err := f.forceMove(ctx, off, 2); err != nil {
			return err
		}
		if left := f.waitOn(ctx, off, f.c.greenID, 45*time.Second); len(left) > 0 {
			return fmt.Errorf("%d hitl sessions still not on green 45 s after a forced move with blue stopped (e.g. %s)", len(left), left[0].id)
		}
		log.Printf("%s forced moves after the blue owners stopped: %d sessions adopted by green in %v", f.since(), len(off), time.Since(t1).Round(100*time.Millisecond))
	}
	f.figure("hitl sessions force-moved: %d (%d by a live blue owner's handoff, %d adopted after blue stopped)", len(hitl), len(hitl)-len(off), len(off))
	// Each moved hitl session takes a delivery on green.
	if err := parallel(hitl, 8, func(s *fsess) error {
		return f.deliver(ctx, s, f.c.green, "after the forced move", "after-force-"+s.id)
	}); err != nil {
		return err
	}

	// Quiet sessions: still blue (hibernated by the drain); a command through
	// green's ingress makes green adopt them.
	quiet := f.ofKind(kQuiet)
	t2 := time.Now()
	if err := parallel(quiet, 8, func(s *fsess) error {
		return f.deliver(ctx, s, f.c.green, "after retirement", "quiet-"+s.id)
	}); err != nil {
		return err
	}
	if left := f.waitOn(ctx, quiet, f.c.greenID, 45*time.Second); len(left) > 0 {
		return fmt.Errorf("%d quiet sessions of retired blue not adopted by green within 45 s (e.g. %s)", len(left), left[0].id)
	}
	f.figure("quiet sessions adopted from retired blue on their next command: %d in %v", len(quiet), time.Since(t2).Round(100*time.Millisecond))
	if _, off := f.onDeployment(f.sessions, f.c.greenID); len(off) > 0 {
		f.note("%d sessions not yet on green after blue stopped (they move on their next command)", len(off))
	}
	rep, err := f.report(ctx)
	if err == nil {
		log.Printf("%s drain report: blue %v | green %v", f.since(), rep[f.c.blueID], rep[f.c.greenID])
	}
	return nil
}

// ---- faults on green ----

// ownedBy lists the sessions whose latest record names process p, active.
func (f *full) ownedBy(p string) []string {
	var out []string
	for _, s := range f.sessions {
		if r, ok := f.kvr.latest(s.id); ok && r.OwnerProcess == p && r.State == "active" {
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
			at, ok := f.kvr.firstOtherOwner(id, p, t)
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
		if len(left) == 0 || time.Now().After(end) || !sleepCtx(ctx, 200*time.Millisecond) {
			return first, last, left
		}
	}
}

func (f *full) killGreen2(ctx context.Context) error {
	cid, err := f.container(ctx, "owner-green-2")
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

func (f *full) restartNATSNode(ctx context.Context) error {
	cid, err := f.container(ctx, "nats3")
	if err != nil {
		return err
	}
	t := time.Now()
	if _, err := docker(ctx, "stop", "-t", "5", cid); err != nil {
		return err
	}
	log.Printf("%s nats3 stopped (%v)", f.since(), time.Since(t).Round(10*time.Millisecond))
	sleepCtx(ctx, 10*time.Second)
	if _, err := docker(ctx, "start", cid); err != nil {
		return err
	}
	log.Printf("%s nats3 started again; waiting for it to rejoin", f.since())
	// n3's monitoring port is not published: a settle time instead, with
	// traffic running.
	sleepCtx(ctx, 5*time.Second)
	f.figure("nats3 down for %v, traffic running", (10 * time.Second).String())
	return nil
}

func (f *full) partitionGreen1(ctx context.Context) error {
	cid, err := f.container(ctx, "owner-green-1")
	if err != nil {
		return err
	}
	netw, err := docker(ctx, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", cid)
	if err != nil {
		return err
	}
	netw = strings.Fields(netw)[0]
	ids := f.ownedBy("green-1")
	f.greenRunsBeforeCut = f.kvr.runsOf("green-1")
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
	sleepCtx(ctx, time.Until(f.cutAt.Add(cutFor)))
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
	return nil
}

// ---- quiescence ----

func (f *full) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	t0, lastLog := time.Now(), time.Now()
	defer func() {
		f.figure("quiescence after the traffic stopped: every session idle on green after %v", time.Since(t0).Round(100*time.Millisecond))
	}()
	for {
		var bad []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, s := range f.sessions {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				var st status
				err := call(ctx, "GET", f.c.green+"/v1/sessions/"+s.id, nil, http.StatusOK, &st)
				if err != nil || !st.Idle || st.DeploymentID != f.c.greenID {
					r, _ := f.kvr.latest(s.id)
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d/%s %s:%s owner=%s queue=%d idle=%v err=%v", s.i, kindNames[s.kind], st.DeploymentID, st.State, r.OwnerProcess, st.QueueDepth, st.Idle, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad) == 0 {
			log.Printf("%s every session idle on %s", f.since(), f.c.greenID)
			return nil
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			sort.Strings(bad)
			log.Printf("%s %d sessions not idle on green yet, e.g. %v", f.since(), len(bad), bad[:min(3, len(bad))])
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 2*time.Second) {
			sort.Strings(bad)
			return fmt.Errorf("%d sessions never idle on green, e.g. %v", len(bad), bad[:min(5, len(bad))])
		}
	}
}

// ---- KV recorder ----

type kvRec struct {
	SessionID    string    `json:"sessionId"`
	OwnerRunID   string    `json:"ownerRunId"`
	DeploymentID string    `json:"deploymentId"`
	Epoch        uint64    `json:"epoch"`
	OwnerProcess string    `json:"ownerProcess"`
	State        string    `json:"state"`
	Writer       string    `json:"writer"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

type kvObs struct {
	rev uint64
	rec kvRec
	at  time.Time
}

type kvRecorder struct {
	mu      sync.Mutex
	obs     map[string][]kvObs
	runProc map[string]string
	runDep  map[string]string
	total   int
}

func startKVRecorder(ctx context.Context, js jetstream.JetStream) (*kvRecorder, error) {
	kv, err := js.KeyValue(ctx, "baton_sessions")
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	r := &kvRecorder{obs: map[string][]kvObs{}, runProc: map[string]string{}, runDep: map[string]string{}}
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec kvRec
			if json.Unmarshal(e.Value(), &rec) != nil {
				continue
			}
			r.mu.Lock()
			r.obs[e.Key()] = append(r.obs[e.Key()], kvObs{rev: e.Revision(), rec: rec, at: time.Now()})
			if rec.OwnerRunID != "" {
				r.runProc[rec.OwnerRunID] = rec.OwnerProcess
				r.runDep[rec.OwnerRunID] = rec.DeploymentID
			}
			r.total++
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *kvRecorder) latest(id string) (kvRec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.obs[id]
	if len(o) == 0 {
		return kvRec{}, false
	}
	return o[len(o)-1].rec, true
}

// firstOtherOwner: when a record of id observed after t first named an
// owner process other than p.
func (r *kvRecorder) firstOtherOwner(id, p string, t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.obs[id] {
		if o.at.After(t) && o.rec.OwnerProcess != "" && o.rec.OwnerProcess != p {
			return o.at, true
		}
	}
	return time.Time{}, false
}

func (r *kvRecorder) runsOf(p string) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for run, proc := range r.runProc {
		if proc == p {
			out[run] = true
		}
	}
	return out
}

// ---- exec log tailer ----

type execObs struct {
	process string
	session string
	stepKey string
	// The line was absent from the read that started at notBefore and
	// present in the one that ended at by: the agent recorded the step (and
	// then ran it) in (notBefore, by].
	notBefore, by time.Time
}

type execTailer struct {
	mu  sync.Mutex
	obs []execObs
}

func startExecTailer(ctx context.Context, dir string, procs []string) *execTailer {
	t := &execTailer{}
	go func() {
		offs := map[string]int64{}
		part := map[string]string{}
		prev := time.Now()
		for ctx.Err() == nil {
			startRead := time.Now()
			for _, p := range procs {
				fh, err := os.Open(filepath.Join(dir, p+".jsonl"))
				if err != nil {
					continue
				}
				_, _ = fh.Seek(offs[p], io.SeekStart)
				b, _ := io.ReadAll(fh)
				fh.Close()
				offs[p] += int64(len(b))
				s := part[p] + string(b)
				lines := strings.Split(s, "\n")
				part[p] = lines[len(lines)-1]
				end := time.Now()
				t.mu.Lock()
				for _, l := range lines[:len(lines)-1] {
					var e struct{ SessionID, StepKey, Process string }
					if json.Unmarshal([]byte(l), &e) == nil {
						t.obs = append(t.obs, execObs{process: p, session: e.SessionID, stepKey: e.StepKey, notBefore: prev, by: end})
					}
				}
				t.mu.Unlock()
			}
			prev = startRead
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}()
	return t
}

func (t *execTailer) all() []execObs {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.obs)
}

// ---- SSE ----

type sseStream struct {
	s          *fsess
	mu         sync.Mutex
	ids        []uint64
	reconnects int
	err        error
}

func (f *full) startSSE(ctx context.Context) {
	seen := map[kind]bool{}
	for _, s := range f.sessions {
		if len(f.sse) >= f.f.sseStreams {
			break
		}
		if !seen[s.kind] || len(seen) == len(kindNames) {
			seen[s.kind] = true
			st := &sseStream{s: s}
			f.sse = append(f.sse, st)
			go st.run(ctx, f.c.green)
		}
	}
	log.Printf("%s %d SSE streams open on green's ingress from seq 0", f.since(), len(f.sse))
}

var sseClient = &http.Client{}

func (st *sseStream) run(ctx context.Context, base string) {
	var last uint64
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+st.s.id+"/events?after="+strconv.FormatUint(last, 10), nil)
		req.Header.Set("Accept", "text/event-stream")
		if last > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
		}
		resp, err := sseClient.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if v, ok := strings.CutPrefix(line, "id: "); ok {
					id, _ := strconv.ParseUint(v, 10, 64)
					st.mu.Lock()
					st.ids = append(st.ids, id)
					st.mu.Unlock()
					last = id
				}
			}
			resp.Body.Close()
		} else if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return
		}
		st.mu.Lock()
		st.reconnects++
		st.mu.Unlock()
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// ---- events and checks ----

type envelope struct {
	SessionID    string          `json:"sessionId"`
	Seq          uint64          `json:"seq"`
	Time         time.Time       `json:"time"`
	OwnerRunID   string          `json:"ownerRunId"`
	DeploymentID string          `json:"deploymentId"`
	Kind         string          `json:"kind"`
	Data         json.RawMessage `json:"data"`
}

func (f *full) readEvents(ctx context.Context) (map[string][]envelope, int, error) {
	st, err := f.js.Stream(ctx, "BATON_EVENTS")
	if err != nil {
		return nil, 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	last := info.State.LastSeq
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]envelope{}
	dups := 0
	seen := map[string]map[uint64]envelope{}
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			return nil, 0, err
		}
		n := 0
		var lastSeen uint64
		for m := range batch.Messages() {
			n++
			md, _ := m.Metadata()
			lastSeen = md.Sequence.Stream
			var e envelope
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				continue
			}
			if _, ok := f.byID[e.SessionID]; !ok {
				continue
			}
			if seen[e.SessionID] == nil {
				seen[e.SessionID] = map[uint64]envelope{}
			}
			if p, ok := seen[e.SessionID][e.Seq]; ok {
				dups++
				if p.Kind != e.Kind || p.OwnerRunID != e.OwnerRunID || string(p.Data) != string(e.Data) {
					return nil, 0, fmt.Errorf("session %s: two different events with seq %d: %s and %s", e.SessionID, e.Seq, p.Kind, e.Kind)
				}
				continue
			}
			seen[e.SessionID][e.Seq] = e
			out[e.SessionID] = append(out[e.SessionID], e)
		}
		if lastSeen >= last {
			break
		}
		if n == 0 && !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, 0, ctx.Err()
		}
	}
	for id := range out {
		sort.Slice(out[id], func(i, j int) bool { return out[id][i].Seq < out[id][j].Seq })
	}
	return out, dups, nil
}

func (f *full) checkAll(ctx context.Context) []error {
	var errs []error
	fail := func(format string, a ...any) {
		if len(errs) < 40 {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	evs, dups, err := f.readEvents(ctx)
	if err != nil {
		return []error{fmt.Errorf("read BATON_EVENTS: %w", err)}
	}
	f.kvr.mu.Lock()
	obs := f.kvr.obs
	runProc := f.kvr.runProc
	kvTotal := f.kvr.total
	f.kvr.mu.Unlock()

	var nAccepted, nApplied, nEvents, moveApplied, moves int
	moved := map[string]int{}
	skips := map[string]int{}
	for _, s := range f.sessions {
		es := evs[s.id]
		nEvents += len(es)
		// (a) events: seq 1..n, contiguous.
		for n, e := range es {
			if e.Seq != uint64(n+1) {
				fail("session %d (%s): event %d has seq %d: a gap", s.i, s.id, n+1, e.Seq)
				break
			}
		}
		// (b) exactly once, in order; (c) one writer at a time: each run's
		// events form one block, never resumed after a later run wrote.
		applied := map[uint64]int{}
		var order []uint64
		runsDone := map[string]bool{}
		cur := ""
		for _, e := range es {
			if e.OwnerRunID != "" && e.OwnerRunID != cur {
				if runsDone[e.OwnerRunID] {
					fail("session %d (%s): run %s (%s) wrote seq %d after a later run had written", s.i, s.id, e.OwnerRunID, runProc[e.OwnerRunID], e.Seq)
				}
				runsDone[cur] = true
				cur = e.OwnerRunID
			}
			switch e.Kind {
			case "command.applied":
				var d struct{ Seq uint64 }
				_ = json.Unmarshal(e.Data, &d)
				applied[d.Seq]++
				order = append(order, d.Seq)
				if applied[d.Seq] > 1 {
					fail("session %d (%s): command seq %d applied %d times", s.i, s.id, d.Seq, applied[d.Seq])
				}
			case "handoff.completed":
				var d struct{ HandoffID string }
				_ = json.Unmarshal(e.Data, &d)
				switch {
				case strings.HasPrefix(d.HandoffID, "adopt-"):
					moved["adopted"]++
				default:
					moved["handoff"]++
				}
			case "handoff.skipped":
				var d struct{ Reason string }
				_ = json.Unmarshal(e.Data, &d)
				skips[kindNames[s.kind]+":"+d.Reason]++
			}
		}
		s.mu.Lock()
		acc := slices.Clone(s.acc)
		s.mu.Unlock()
		mine := map[uint64]bool{}
		for _, a := range acc {
			nAccepted++
			mine[a.seq] = true
			switch {
			case a.what == "move":
				moves++
				moveApplied += applied[a.seq]
			case applied[a.seq] != 1:
				fail("session %d (%s, %s): accepted %s seq %d applied %d times, want once", s.i, s.id, kindNames[s.kind], a.what, a.seq, applied[a.seq])
			default:
				nApplied++
			}
		}
		var prev uint64
		for _, q := range order {
			if mine[q] {
				if q < prev {
					fail("session %d (%s): command seq %d applied after seq %d", s.i, s.id, q, prev)
				}
				prev = q
			}
		}
		// (d) KV: epochs never go down; one run per epoch; a new run has a
		// greater epoch than every earlier one; no write by a superseded run.
		epochRun := map[uint64]string{}
		var maxEpoch uint64
		superseded := map[string]bool{}
		curRun := ""
		for _, o := range obs[s.id] {
			r := o.rec
			if r.Epoch < maxEpoch {
				fail("session %d (%s): revision %d has epoch %d after epoch %d", s.i, s.id, o.rev, r.Epoch, maxEpoch)
			}
			if superseded[r.Writer] {
				fail("session %d (%s): revision %d written by superseded run %s (%s)", s.i, s.id, o.rev, r.Writer, runProc[r.Writer])
			}
			if r.OwnerRunID != "" {
				if prevRun, ok := epochRun[r.Epoch]; ok && prevRun != r.OwnerRunID {
					fail("session %d (%s): epoch %d held by two runs, %s (%s) and %s (%s)", s.i, s.id, r.Epoch, prevRun, runProc[prevRun], r.OwnerRunID, r.OwnerProcess)
				}
				epochRun[r.Epoch] = r.OwnerRunID
				if curRun != "" && r.OwnerRunID != curRun {
					if r.Epoch <= maxEpoch {
						fail("session %d (%s): run %s took over at epoch %d, not above %d", s.i, s.id, r.OwnerRunID, r.Epoch, maxEpoch)
					}
					superseded[curRun] = true
				}
				curRun = r.OwnerRunID
			}
			maxEpoch = max(maxEpoch, r.Epoch)
		}
		if r, ok := f.kvr.latest(s.id); !ok || r.DeploymentID != f.c.greenID {
			fail("session %d (%s): last record %+v, want deployment green", s.i, s.id, r)
		}
	}
	log.Printf("checked %d events of %d sessions (%d re-published copies ignored), %d KV revisions: %d accepted commands (%d deliveries/creates applied exactly once, in order; %d forced moves, %d of them applied)",
		nEvents, len(f.sessions), dups, kvTotal, nAccepted, nApplied, moves, moveApplied)
	f.figure("sessions moved blue → green: %d of %d (%d by handoff on a delivery or move, %d adopted from retired blue)", len(f.sessions), len(f.sessions), moved["handoff"], moved["adopted"])
	if len(skips) > 0 {
		f.figure("handoffs skipped (kind:reason → count): %v", skips)
	}

	// (e) The partitioned owner ran no step after its lease expired: no step
	// recorded by green-1 inside (cut + TTL, reconnect) — bounds from the
	// tailer's reads, so the check never blames a step recorded earlier.
	expiry := f.cutAt.Add(f.f.leaseTTL)
	var lastDuring time.Duration
	stepsDuring := 0
	perProc := map[string]int{}
	for _, o := range f.exec.all() {
		perProc[o.process]++
	}
	log.Printf("exec logs tailed: %v step lines per process", perProc)
	for _, o := range f.exec.all() {
		if o.process != "green-1" || o.by.Before(f.cutAt) || o.notBefore.After(f.reconnectAt) {
			continue
		}
		stepsDuring++
		lastDuring = max(lastDuring, o.notBefore.Sub(f.cutAt))
		if o.notBefore.After(expiry) && o.by.Before(f.reconnectAt) {
			fail("partitioned owner green-1 ran step %s of session %s at %v–%v after the cut, after its lease expired (TTL %v)",
				o.stepKey, o.session, o.notBefore.Sub(f.cutAt).Round(time.Millisecond), o.by.Sub(f.cutAt).Round(time.Millisecond), f.f.leaseTTL)
		}
	}
	// and none of its pre-cut runs committed after another run took over
	// (checked above per session: no write by a superseded run); report how
	// many of its runs' events carry a time after the lease expiry.
	late := 0
	for _, es := range evs {
		for _, e := range es {
			if f.greenRunsBeforeCut[e.OwnerRunID] && e.Time.After(expiry) && e.Time.Before(f.reconnectAt) {
				late++
				fail("session %s: event seq %d (%s) of green-1's pre-partition run %s stamped %v after the cut", e.SessionID, e.Seq, e.Kind, e.OwnerRunID, e.Time.Sub(f.cutAt))
			}
		}
	}
	f.figure("partitioned owner green-1: %d steps started during the cut, the last at most %v after it (lease TTL %v); 0 after the lease expired; %d events committed by its old runs after expiry",
		stepsDuring, lastDuring.Round(time.Millisecond), f.f.leaseTTL, late)

	// (f) SSE: gap-free from seq 1 to the session's last event.
	for _, st := range f.sse {
		want := uint64(len(evs[st.s.id]))
		deadline := time.Now().Add(15 * time.Second)
		for {
			st.mu.Lock()
			n := len(st.ids)
			st.mu.Unlock()
			if uint64(n) >= want || time.Now().After(deadline) || !sleepCtx(ctx, 200*time.Millisecond) {
				break
			}
		}
		st.mu.Lock()
		ids := slices.Clone(st.ids)
		rc := st.reconnects
		st.mu.Unlock()
		ok := uint64(len(ids)) == want
		for n, id := range ids {
			if id != uint64(n+1) {
				ok = false
				fail("SSE of session %d (%s): event %d has id %d (gap or duplicate)", st.s.i, st.s.id, n+1, id)
				break
			}
		}
		if uint64(len(ids)) != want {
			fail("SSE of session %d (%s): %d events, the stream holds %d", st.s.i, st.s.id, len(ids), want)
		}
		log.Printf("SSE %s session %d: %d events, seq 1..%d, %d reconnects, complete=%v", kindNames[st.s.kind], st.s.i, len(ids), want, rc, ok)
	}
	return errs
}
