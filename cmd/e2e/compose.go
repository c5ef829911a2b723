package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/harness"
)

// dc runs the compose command with args.
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

func (f *full) container(svc string) (string, error) {
	id := f.cids[svc]
	if id == "" {
		return "", fmt.Errorf("no container for %s", svc)
	}
	return id, nil
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
		harness.Sleep(ctx, 250*time.Millisecond)
	}
	return time.Time{}, false
}

// waitOwners waits until every owner holds its lease.
func (f *full) waitOwners(ctx context.Context) error {
	kv, err := f.js.KeyValue(ctx, f.names.OwnersBucket())
	for err != nil {
		if !harness.Sleep(ctx, 500*time.Millisecond) {
			return err
		}
		kv, err = f.js.KeyValue(ctx, f.names.OwnersBucket())
	}
	for {
		n := 0
		for _, p := range owners {
			if _, err := kv.Get(ctx, "lease."+p); err == nil {
				n++
			}
		}
		if n == len(owners) {
			return nil
		}
		if !harness.Sleep(ctx, 500*time.Millisecond) {
			return fmt.Errorf("owner leases: %d of 4: %w", n, ctx.Err())
		}
	}
}
