package tour

import (
	"strings"
	"syscall"
	"testing"
)

// A SIGTERM to make run's whole process group (kill -TERM -- -PGID, as a
// supervisor or `kill %1` sends it) is one drain, like a Ctrl-C: owner and
// ingress have it once, and the copy GNU make passes on to the script is
// not passed on again, which would be a second signal and abort the drain.
// The drain waits for a running step of a few seconds, longer than the
// script takes to tell a group's SIGTERM from one to make alone, so a copy
// passed on late aborts it too. Off the default NATS port, the banner says
// what NATS_URL to export.
func TestSigtermToGroupDrainsOnce(t *testing.T) {
	s := newStack(t)
	run := s.make("run")
	base := run.ready("v1")
	sid := deliver(t, base, `{"alias":"sleeper","text":"/sleep 3s"}`, "v1", true)
	sse(t, base, sid, func(evs []event) bool { return hasKind(evs, "turn.started") })
	export := "export NATS_URL=nats://127.0.0.1:" + s.value("NATS_PORT") + "   "
	if out := run.output(); !strings.Contains(out, "\n            "+export) {
		t.Fatalf("make run on NATS port %s does not print %q:\n%s", s.value("NATS_PORT"), export, out)
	}
	run.sigterm(-run.cmd.Process.Pid)
	run.drainedOnce()
}

// A SIGTERM to make alone reaches owner and ingress only through the
// script, which passes it on once.
func TestSigtermToMakeDrainsOnce(t *testing.T) {
	s := newStack(t)
	run := s.make("run")
	run.ready("v1")
	run.sigterm(run.cmd.Process.Pid)
	run.drainedOnce()
}

// sigterm sends SIGTERM to pid (a negative pid: to its process group).
func (j *job) sigterm(pid int) {
	j.t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		j.t.Fatal(err)
	}
}

// drainedOnce checks that make run ended after one drain of owner and
// ingress, both exiting 0, reported once: GNU make, once its recipe has
// ended, ends by the SIGTERM it got (or exits 0), and prints "***" only
// for a recipe that failed or was killed.
func (j *job) drainedOnce() {
	j.t.Helper()
	out, err := j.wait(drainWait)
	if j.cmd.ProcessState == nil {
		j.t.Fatalf("%v\n%s", err, out)
	}
	ws, _ := j.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !(ws.Signaled() && ws.Signal() == syscall.SIGTERM || ws.Exited() && ws.ExitStatus() == 0) {
		j.t.Fatalf("%s after SIGTERM: %v, want the SIGTERM (or exit 0)\n%s", j.name, err, out)
	}
	for _, bad := range []string{"make: ***", "a second signal", "Terminated"} {
		if strings.Contains(out, bad) {
			j.t.Fatalf("%s after one SIGTERM printed %q:\n%s", j.name, bad, out)
		}
	}
	for _, once := range []string{
		`"msg":"draining: no new work`,
		`"msg":"drained: every session hibernated`,
		`"msg":"ingress draining: no new requests`,
		"baton: deployment v1 stopped: owner exit 0, ingress exit 0\n",
	} {
		if n := strings.Count(out, once); n != 1 {
			j.t.Fatalf("%s after one SIGTERM printed %q %d times, want once:\n%s", j.name, once, n, out)
		}
	}
}
