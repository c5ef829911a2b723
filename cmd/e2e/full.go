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
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/subjects"
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

// owners are the stack's owner processes (compose services owner-<name>).
var owners = []string{"blue-1", "blue-2", "green-1", "green-2"}

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
	names   subjects.Names
	start   time.Time

	sessions []*fsess
	byID     map[string]*fsess
	toGreen  atomic.Bool
	stop     chan struct{}
	traffic  sync.WaitGroup
	failed   atomic.Int64 // deliveries refused after retries (not counted as accepted)

	cids map[string]string // compose service → container ID, resolved once

	kvr  *harness.RecordWatch
	exec *harness.ExecTail
	sse  []*sseStream

	figures []string
	notes   []string

	// fault windows (host clock; containers share it)
	killAt, cutAt, reconnectAt time.Time
	greenRunsBeforeCut         map[string]bool
}

func runFull(ctx context.Context, c config, fc fullConfig) error {
	f := &full{c: c, f: fc, compose: os.Getenv("COMPOSE"), stop: make(chan struct{}), byID: map[string]*fsess{}, start: time.Now(), names: subjects.Default()}
	if err := f.setUp(ctx); err != nil {
		return err
	}
	defer f.nc.Close()
	defer f.kvr.Stop()

	// 2. Sessions on blue.
	if err := f.createSessions(ctx); err != nil {
		return err
	}
	sseCtx, sseCancel := context.WithCancel(ctx)
	defer sseCancel()
	f.startSSE(sseCtx)

	// 3. Traffic: blue, then green; the drain report.
	if err := f.trafficAndDrain(ctx); err != nil {
		return err
	}
	// 4. Retire, forced moves, SIGTERM, adoption.
	if err := f.retireAndStopBlue(ctx); err != nil {
		return err
	}
	// 5. Faults on green, traffic running.
	if err := f.faults(ctx); err != nil {
		return err
	}
	// 6. Quiesce and check.
	close(f.stop)
	f.traffic.Wait()
	log.Printf("%s traffic stopped (%d deliveries refused after retries)", f.since(), f.failed.Load())
	if err := f.waitQuiet(ctx); err != nil {
		return err
	}
	errs := f.checkAll(ctx)
	sseCancel()
	f.printFigures(ctx)
	return errors.Join(errs...)
}

// setUp reads the admin token, waits for the stack (both ingresses, four
// owner leases), resolves its containers and starts the recorders (step 1).
func (f *full) setUp(ctx context.Context) error {
	if f.compose == "" {
		return errors.New("-scenario full needs COMPOSE (the compose command with project and files; make e2e sets it)")
	}
	var err error
	if f.token, err = readToken(f.f.adminTokenFile); err != nil {
		return err
	}
	for _, base := range []string{f.c.blue, f.c.green} {
		if err := waitReady(ctx, base); err != nil {
			return err
		}
	}
	f.nc, f.js, err = harness.Connect(f.c.natsURL+",nats://baton:baton@127.0.0.1:14223,nats://baton:baton@127.0.0.1:14224",
		nats.Name("baton-e2e-full"), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return err
	}
	if err := f.waitOwners(ctx); err != nil {
		return err
	}
	if err := f.resolveContainers(ctx); err != nil {
		return err
	}
	log.Printf("%s stack ready: both ingresses, four owner leases", f.since())
	if f.kvr, err = harness.WatchRecords(ctx, f.js, f.names); err != nil {
		return err
	}
	f.exec = harness.TailExecs(ctx, f.f.execLogDir, owners, 50*time.Millisecond)
	return nil
}

// readToken is the first token of an admin token file (lines; # comments).
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l, nil
		}
	}
	return "", nil
}

// trafficAndDrain starts the traffic (busy, task, plain) on blue's ingress,
// moves it to green's after -blue-traffic and waits for the drain.
func (f *full) trafficAndDrain(ctx context.Context) error {
	for _, s := range f.sessions {
		if s.kind == kBusy || s.kind == kTask || s.kind == kPlain {
			f.traffic.Add(1)
			go f.drive(ctx, s)
		}
	}
	log.Printf("%s traffic on blue's ingress for %v", f.since(), f.f.blueTraffic)
	harness.Sleep(ctx, f.f.blueTraffic)
	f.toGreen.Store(true)
	switched := time.Now()
	log.Printf("%s traffic moved to green's ingress", f.since())
	return f.waitDrained(ctx, switched)
}

// faults SIGKILLs green-2, restarts nats3 and partitions green-1, the
// traffic running, then lets it run 5 s more.
func (f *full) faults(ctx context.Context) error {
	if err := f.killGreen2(ctx); err != nil {
		return err
	}
	if err := f.restartNATSNode(ctx); err != nil {
		return err
	}
	if err := f.partitionGreen1(ctx); err != nil {
		return err
	}
	harness.Sleep(ctx, 5*time.Second)
	return nil
}
