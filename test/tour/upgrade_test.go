package tour

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpgrade runs the README's Upgrade: with make run up and the tour's
// session C123.456 on v1, `make deployment DEP=v2` in a second terminal, a
// delivery through the v2 ingress, the session's events over SSE showing
// the handoff, then one Ctrl-C on the v1 terminal: v1 drains and exits 0,
// NATS and v2 go on.
func TestUpgrade(t *testing.T) {
	s := newStack(t)
	v1 := s.make("run")
	base1 := v1.ready("v1")

	// The tour's delivery: curl -s -X POST localhost:8080/v1/deliveries -d '{"alias":"C123.456","text":"hello"}'
	sid := deliver(t, base1, `{"alias":"C123.456","text":"hello"}`, "v1", true)
	eventually(t, "the session idle on v1", func() bool {
		st := status(t, base1, sid)
		return st.Idle && st.DeploymentID == "v1"
	})

	// make deployment DEP=v2
	v2 := s.make("deployment", "DEP=v2")
	base2 := v2.ready("v2")
	if base2 == base1 {
		t.Fatalf("v2's ingress is on v1's address %s", base1)
	}

	// curl -s -X POST localhost:8081/v1/deliveries -d '{"alias":"C123.456","text":"after the upgrade"}'
	if got := deliver(t, base2, `{"alias":"C123.456","text":"after the upgrade"}`, "v2", false); got != sid {
		t.Fatalf("the v2 delivery went to %s, not the tour's session %s", got, sid)
	}

	// curl -sN localhost:8081/v1/sessions/$SID/events
	evs := sse(t, base2, sid, func(evs []event) bool { return hasText(evs, "after the upgrade") })
	var kinds []string
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		kinds = append(kinds, ev.Kind)
	}
	k := strings.Join(kinds, " ")
	if !strings.Contains(k, "session.waiting handoff.started handoff.completed command.applied") || strings.Count(k, "handoff.completed") != 1 {
		t.Fatalf("events %s: want one handoff (started, completed) before the v2 command", k)
	}
	if st := status(t, base2, sid); st.DeploymentID != "v2" || st.Epoch != 2 {
		t.Fatalf("status after the upgrade: %+v, want deployment v2, epoch 2", st)
	}

	// Ctrl-C on the v1 terminal: one drain, exit 0, no error from make.
	v1.ctrlC()
	out := v1.interrupted(drainWait)
	for _, want := range []string{"baton: deployment v1 stopped: owner exit 0, ingress exit 0", `"msg":"draining: no new work`, `"msg":"lease released"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("make run output lacks %q", want)
		}
	}
	if n := strings.Count(out, `"msg":"draining: no new work`); n != 1 {
		t.Fatalf("%d drains after one Ctrl-C", n)
	}
	if strings.Contains(out, "a second signal") {
		t.Fatal("one Ctrl-C counted as two signals")
	}

	// NATS survived v1's Ctrl-C: v2 goes on serving the session.
	deliver(t, base2, `{"alias":"C123.456","text":"still here"}`, "v2", false)
	sse(t, base2, sid, func(evs []event) bool { return hasText(evs, "still here") })

	v2.ctrlC()
	if out := v2.interrupted(drainWait); !strings.Contains(out, "baton: deployment v2 stopped: owner exit 0, ingress exit 0") {
		t.Fatalf("make deployment after Ctrl-C:\n%s", out)
	}
	stop := s.make("stop")
	if out, err := stop.wait(30 * time.Second); err != nil || !strings.Contains(out, "baton: NATS server stopped") {
		t.Fatalf("make stop: %v\n%s", err, out)
	}
}

// A second make run on a data directory in use fails at once, naming the
// running instance, and touches nothing: no NATS server is started or
// stopped, the store is not opened, the first instance goes on.
func TestSecondRunRefused(t *testing.T) {
	s := newStack(t)
	first := s.make("run")
	base := first.ready("v1")
	pidfile := filepath.Join(s.dir, "nats.pid")
	natsPID, _ := os.ReadFile(pidfile)
	natsLog, _ := os.ReadFile(filepath.Join(s.dir, "nats.log"))
	ownerLock, _ := os.ReadFile(filepath.Join(s.dir, "owner-v1.lock"))

	second := s.make("run")
	out, err := second.wait(60 * time.Second) // make build first (up to date), then the refusal
	if err == nil || second.cmd.ProcessState == nil || second.cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("second make run: %v, want a failure\n%s", err, out)
	}
	want := "baton: deployment v1 already runs from " + s.dir + " (" + strings.TrimSpace(string(ownerLock)) + ")"
	if !strings.Contains(out, want) || !strings.Contains(string(ownerLock), "owner of deployment v1") {
		t.Fatalf("second make run does not name the running instance (%q):\n%s", want, out)
	}
	if strings.Contains(out, "NATS") || strings.Contains(out, `"msg"`) {
		t.Fatalf("second make run went further than the refusal:\n%s", out)
	}
	if pid, _ := os.ReadFile(pidfile); string(pid) != string(natsPID) {
		t.Fatalf("NATS pid file changed: %q → %q", natsPID, pid)
	}
	if log, _ := os.ReadFile(filepath.Join(s.dir, "nats.log")); string(log) != string(natsLog) {
		t.Fatalf("the NATS server log changed:\n%s", log[len(natsLog):])
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("the first instance after the refused second: readyz %d %s", code, body)
	}
	first.ctrlC()
	first.interrupted(drainWait)
}

type sessionStatus struct {
	DeploymentID string `json:"deploymentId"`
	Epoch        uint64 `json:"epoch"`
	Idle         bool   `json:"idle"`
}

func status(t *testing.T, base, sid string) sessionStatus {
	t.Helper()
	code, body := get(t, base+"/v1/sessions/"+sid)
	var st sessionStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET /v1/sessions/%s = %d %s", sid, code, body)
	}
	return st
}

// deliver posts a delivery and checks the receipt's stamp; it returns the
// session ID.
func deliver(t *testing.T, base, body, dep string, created bool) string {
	t.Helper()
	resp, err := http.Post(base+"/v1/deliveries", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rc struct {
		SessionID    string `json:"sessionId"`
		Created      bool   `json:"created"`
		DeploymentID string `json:"deploymentId"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &rc) != nil || rc.DeploymentID != dep || rc.Created != created {
		t.Fatalf("POST %s/v1/deliveries %s = %d %s, want 202 stamped %s, created %v", base, body, resp.StatusCode, b, dep, created)
	}
	return rc.SessionID
}

// sse reads the session's Server-Sent Events until done holds.
func sse(t *testing.T, base, sid string, done func([]event) bool) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+sid+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("SSE data %q: %v", data, err)
		}
		if evs = append(evs, ev); done(evs) {
			return evs
		}
	}
	t.Fatalf("the event stream ended (%v) before the expected events: %s", sc.Err(), kinds(evs))
	return nil
}

func hasText(evs []event, text string) bool {
	for _, ev := range evs {
		var d struct {
			Text string `json:"text"`
		}
		if ev.Kind == "message.output" && json.Unmarshal(ev.Data, &d) == nil && d.Text == text {
			return true
		}
	}
	return false
}

// A second Ctrl-C on the make run terminal aborts the drain of a running
// step at once, as the README says.
func TestSecondCtrlCAborts(t *testing.T) {
	s := newStack(t)
	run := s.make("run")
	base := run.ready("v1")
	sid := deliver(t, base, `{"alias":"sleeper","text":"/sleep 30s"}`, "v1", true)
	sse(t, base, sid, func(evs []event) bool { return hasKind(evs, "turn.started") })
	run.ctrlC()
	run.waitFor(`"msg":"draining: no new work`, wait)
	run.ctrlC()
	out, _ := run.wait(15 * time.Second)
	for _, want := range []string{"owner: a second signal (interrupt): aborting", "baton: deployment v1 stopped: owner ended by signal 2 (status 130)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("make run after two Ctrl-Cs lacks %q\n%s", want, out)
		}
	}
}

// TestTakenPortRefused: make run whose ingress port another program
// listens on stops before starting anything, naming the port; it must not
// print the banner over that program (the banner's readiness check only
// sees that something listens).
func TestTakenPortRefused(t *testing.T) {
	s := newStack(t)
	port := s.value("HTTP_PORT")
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	run := s.make("run")
	out, err := run.wait(3 * time.Minute) // make build first
	if err == nil || run.cmd.ProcessState == nil || run.cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("make run on a taken port: %v, want a failure\n%s", err, out)
	}
	if want := "baton: port " + port + " is in use: the ingress cannot listen on it"; !strings.Contains(out, want) {
		t.Fatalf("make run does not name the taken port (%q):\n%s", want, out)
	}
	if strings.Contains(out, "is running") || strings.Contains(out, "NATS") {
		t.Fatalf("make run went further than the refusal:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "nats.pid")); !os.IsNotExist(err) {
		t.Fatalf("a NATS server was started: nats.pid %v", err)
	}
}
