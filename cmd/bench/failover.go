package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// foPrefix keeps the failover suite's streams and buckets apart from the
// other suites' (its owner processes ensure their own topology).
const foPrefix = "fo"

// benchFailover: failover_resume is SIGKILL of the owner process running a
// session's step → the first step of that session resumed on a peer (the
// re-run of the interrupted step, seen in the peer's execution log). Three
// owner processes (bin built without -race) run with the production default
// lease TTL; each kill's victim is restarted under its process ID.
func benchFailover(ctx context.Context, e *env, r *bench.Reporter) error {
	kills := max(e.n(20), 20)
	dir, err := os.MkdirTemp("", "baton-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "owner")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/baton-rt/baton/cmd/owner").CombinedOutput(); err != nil {
		return fmt.Errorf("build owner: %v\n%s", err, out)
	}
	names, err := subjects.New(foPrefix)
	if err != nil {
		return err
	}
	f := &foRig{e: e, dir: dir, bin: bin, names: names, procs: map[string]*foProc{}}
	defer f.stopAll()
	for i := range 3 {
		if err := f.startOwner(fmt.Sprintf("fo-%d", i)); err != nil {
			return err
		}
	}
	var samples []time.Duration
	for k := range kills {
		d, err := f.killOnce(ctx, k)
		if err != nil {
			return fmt.Errorf("kill %d: %w", k, err)
		}
		samples = append(samples, d)
	}
	r.Latencies("failover_resume", samples, 0,
		bench.Field("ttl_ms", pool.DefaultLeaseTTL.Milliseconds()),
		bench.Field("renew_ms", (pool.DefaultLeaseTTL/4).Milliseconds()),
		bench.Field("owners", 3))
	return nil
}

type foRig struct {
	e     *env
	dir   string
	bin   string
	names subjects.Names
	mu    sync.Mutex
	procs map[string]*foProc
}

type foProc struct {
	pid     string
	cmd     *exec.Cmd
	serving chan struct{}
	exited  chan struct{}
}

func (f *foRig) execLog(pid string) string { return filepath.Join(f.dir, pid+".jsonl") }

// startOwner runs an owner process and waits until it serves.
func (f *foRig) startOwner(pid string) error {
	cmd := exec.Command(f.bin, "--nats-url", f.e.url, "--deployment-id", "failover", "--prefix", foPrefix,
		"--process-id", pid, "--exec-log", f.execLog(pid), "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(f.dir, pid+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p := &foProc{pid: pid, cmd: cmd, serving: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if os.Getenv("BENCH_LOG") == "1" {
				fmt.Fprintln(os.Stderr, pid+": "+line)
			}
			if strings.Contains(line, `"msg":"owner serving"`) {
				once.Do(func() { close(p.serving) })
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-p.serving:
	case <-p.exited:
		return fmt.Errorf("owner %s exited before serving (log %s)", pid, filepath.Join(f.dir, pid+".log"))
	case <-time.After(30 * time.Second):
		return fmt.Errorf("owner %s not serving after 30s", pid)
	}
	f.mu.Lock()
	f.procs[pid] = p
	f.mu.Unlock()
	return nil
}

func (f *foRig) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range f.procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	}
}

// killOnce starts a session, runs a long step in it, SIGKILLs the process
// running it and measures until a peer starts the step again; then it
// cancels the step and restarts the victim.
func (f *foRig) killOnce(ctx context.Context, k int) (time.Duration, error) {
	sid, err := f.startSession()
	if err != nil {
		return 0, err
	}
	if err := f.send(ctx, sid, fmt.Sprintf("fo-%d-sleep", k), foDeliver("/sleep 1h")); err != nil {
		return 0, err
	}
	var victim string
	if err := foPoll(10*time.Second, func() bool {
		victim = f.ranBy(sid, "t1/1", "")
		return victim != ""
	}); err != nil {
		return 0, fmt.Errorf("the step of %s never started: %w", sid, err)
	}
	f.mu.Lock()
	p := f.procs[victim]
	delete(f.procs, victim)
	f.mu.Unlock()
	// A crash comes at any phase of the victim's renewal cycle (which a
	// just-restarted victim would otherwise start afresh): wait a uniform
	// random part of the renewal period first.
	time.Sleep(rand.N(pool.DefaultLeaseTTL / 4))
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	killed := time.Now()
	if os.Getenv("BENCH_LOG") == "1" {
		fmt.Fprintf(os.Stderr, "bench: killed %s at %s\n", victim, killed.UTC().Format(time.RFC3339Nano))
	}
	var resumed time.Time
	if err := foPoll(30*time.Second, func() bool {
		if f.ranBy(sid, "t1/1", victim) != "" {
			resumed = time.Now()
			return true
		}
		return false
	}); err != nil {
		return 0, fmt.Errorf("step of %s not resumed after killing %s: %w", sid, victim, err)
	}
	<-p.exited
	// End the resumed step, so the sessions of earlier kills stay idle.
	if err := f.send(ctx, sid, fmt.Sprintf("fo-%d-cancel", k), wire.Command{Kind: wire.KindCancel}); err != nil {
		return 0, err
	}
	if err := f.startOwner(victim); err != nil {
		return 0, err
	}
	return resumed.Sub(killed), nil
}

// ranBy returns a process other than not whose execution log shows the
// step key of session sid, or "".
func (f *foRig) ranBy(sid, key, not string) string {
	files, _ := filepath.Glob(filepath.Join(f.dir, "*.jsonl"))
	for _, file := range files {
		entries, err := foReadLog(file)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.SessionID == sid && e.StepKey == key && e.Process != not {
				return e.Process
			}
		}
	}
	return ""
}

// foReadLog reads an execution log, tolerating a partly written last line.
func foReadLog(path string) ([]execlog.Exec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []execlog.Exec
	for line := range strings.SplitSeq(string(b), "\n") {
		var e execlog.Exec
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *foRig) startSession() (string, error) {
	msg, err := f.e.nc.Request(f.names.Start("failover"), []byte(`{"deploymentId":"failover"}`), 10*time.Second)
	if err != nil {
		return "", err
	}
	var rep protocol.StartReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil || rep.Error != nil {
		return "", fmt.Errorf("start: %v %v", err, rep.Error)
	}
	return rep.SessionID, nil
}

func (f *foRig) send(ctx context.Context, sid, id string, c wire.Command) error {
	c.V, c.ID, c.AcceptedDeploymentID, c.AcceptedAt = wire.CurrentVersion, id, "failover", time.Now().UTC()
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		return err
	}
	_, err = f.e.js.Publish(ctx, f.names.Inbox(subjects.StableToken(sid)), data, jetstream.WithMsgID(id))
	return err
}

func foDeliver(text string) wire.Command {
	return wire.Command{Kind: wire.KindDeliver, Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}}}
}

// foPoll polls cond every 2 ms until it holds or timeout passes.
func foPoll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}
