package durability_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// Durable effects across crashes: the demo's /effects n dur makes n
// journaled calls; each real execution is a line in the effects log
// (--effects-log), a replayed call none.

// effectsOf returns the session's real executions by call number.
func effectsOf(t *testing.T, path, id string) map[int][]demo.Effect {
	t.Helper()
	all, err := demo.ReadEffectsLog(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]demo.Effect{}
	for _, e := range all {
		if e.SessionID == id {
			out[e.Call] = append(out[e.Call], e)
		}
	}
	return out
}

// effectsOutput is the /effects step's output: its calls' results.
func effectsOutput(n int, by ...string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("effect %d done by %s", i+1, by[i])
	}
	return strings.Join(parts, "; ")
}

// A process killed right after the second journal write of a step: its
// peer takes the session over and re-runs the step, which replays calls 1
// and 2 and executes 3 and 4. Every call ran exactly once; the step
// committed once, with the results of the runs that recorded them.
func TestJournalCrashAfterJournalWrite(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	log := filepath.Join(t.TempDir(), "effects.jsonl") // not in c.logs: those are execution logs
	a := c.owner("a", "--fault", "crash-after-journal:2", "--effects-log", log)
	id := c.start(protocol.StartRequest{})
	c.owner("b", "--effects-log", log)
	c.send(id, harness.WithID("fx", harness.Deliver("/effects 4 200ms")))
	a.Wait(t, wait)
	if !a.Contains("fault injected: killing this process") {
		t.Fatalf("a exited without the fault:\n%s", harness.LastLines(a.Output(), 30))
	}
	want := effectsOutput(4, "a", "a", "b", "b")
	evs := c.waitOutput(id, want)
	for call := 1; call <= 4; call++ {
		if got := effectsOf(t, log, id)[call]; len(got) != 1 {
			t.Fatalf("call %d executed %d times, want once: %+v", call, len(got), got)
		}
	}
	if n := strings.Count(strings.Join(harness.Outputs(evs), "\n"), want); n != 1 {
		t.Fatalf("the step's output committed %d times", n)
	}
	checkStream(t, evs)
	c.checkCommittedStepsRanOnce(id, evs, stepOf(t, evs, "/effects 4 200ms"))
	c.eventually("the step's journal removed", func() bool { return c.journalLen(id) == 0 })
}

// A process killed after the step returned, before its commit: the
// restarted process re-runs the step and every call replays — zero
// further executions.
func TestJournalCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	log := filepath.Join(t.TempDir(), "effects.jsonl") // not in c.logs: those are execution logs
	a := c.owner("a", "--fault", "crash-before-commit:1", "--effects-log", log)
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.WithID("fx", harness.Deliver("/effects 3 100ms")))
	a.Wait(t, wait)
	if !a.Contains("fault injected: killing this process") {
		t.Fatalf("a exited without the fault:\n%s", harness.LastLines(a.Output(), 30))
	}
	before := effectsOf(t, log, id)
	c.owner("a", "--effects-log", log)
	evs := c.waitOutput(id, effectsOutput(3, "a", "a", "a"))
	after := effectsOf(t, log, id)
	for call := 1; call <= 3; call++ {
		if len(before[call]) != 1 || len(after[call]) != 1 {
			t.Fatalf("call %d: %d executions before the crash, %d after; want 1 and no more", call, len(before[call]), len(after[call]))
		}
	}
	checkStream(t, evs)
}

// A process frozen (SIGSTOP) past its lease inside call 2 of a step,
// after call 1 was recorded: the peer takes over, replays call 1 and
// records call 2 itself; the frozen process, resumed, is fenced and
// commits nothing. The committed results are those recorded first: call
// 1 by a, call 2 by b.
func TestJournalFrozenOwnerRace(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	log := filepath.Join(t.TempDir(), "effects.jsonl") // not in c.logs: those are execution logs
	a := c.owner("a", "--effects-log", log)
	id := c.start(protocol.StartRequest{})
	c.owner("b", "--effects-log", log)
	c.send(id, harness.WithID("fx", harness.Deliver("/effects 3 1s")))
	c.eventually("call 1 recorded", func() bool { return c.journalLen(id) == 1 })
	before := c.record(id)
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = a.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	c.waitOwner(id, "b")
	c.eventually("call 2 recorded by b", func() bool { return strings.Contains(c.journalValue(id, 2), "done by b") })
	seqAtCont := len(c.events(id))
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	evs := c.waitFor(id, "the step's output", func(evs []wire.Event) bool {
		for _, o := range harness.Outputs(evs) {
			if strings.HasPrefix(o, "effect 1 done by a; effect 2 done by b; effect 3 done by ") {
				return true
			}
		}
		return false
	})
	c.waitLogCount(a, "fenced: stopping every session", 1)
	for _, ev := range evs[seqAtCont:] {
		if ev.OwnerRunID == before.OwnerRunID {
			t.Fatalf("event %d (%s) by the frozen run after SIGCONT", ev.Seq, ev.Kind)
		}
	}
	if got := effectsOf(t, log, id)[1]; len(got) != 1 {
		t.Fatalf("call 1 executed %d times after it was recorded", len(got))
	}
	checkStream(t, evs)
}

// stepOf is the key (<turn>/<step>) of the step that answered text.
func stepOf(t *testing.T, evs []wire.Event, text string) string {
	t.Helper()
	turn := ""
	for _, ev := range evs {
		switch ev.Kind {
		case wire.EventTurnStarted:
			var d wire.TurnStarted
			_ = jsonData(ev, &d)
			turn = d.TurnID
		case wire.EventMessageOutput:
			var d wire.MessageOutput
			if jsonData(ev, &d) == nil && d.Text == text {
				return turn + "/1"
			}
		}
	}
	t.Fatalf("no output %q", text)
	return ""
}

// journalLen counts the session's live journal entries.
func (c *cluster) journalLen(id string) int {
	keys := c.journalKeys(id)
	return len(keys)
}

func (c *cluster) journalKeys(id string) []string {
	c.t.Helper()
	kv, err := c.JS.KeyValue(c.t.Context(), c.Names.JournalBucket())
	c.h.Check(err)
	lister, err := kv.ListKeysFiltered(c.t.Context(), id+".>")
	if err != nil {
		return nil
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys
}

// journalValue is the entry of call n of the session's journaled step
// ("" when none).
func (c *cluster) journalValue(id string, n int) string {
	c.t.Helper()
	for _, k := range c.journalKeys(id) {
		if strings.HasSuffix(k, fmt.Sprintf(".%d", n)) {
			kv, err := c.JS.KeyValue(c.t.Context(), c.Names.JournalBucket())
			c.h.Check(err)
			e, err := kv.Get(c.t.Context(), k)
			if err != nil {
				return ""
			}
			var je wire.JournalEntry
			_ = jsonUnmarshal(e.Value(), &je)
			return string(je.Result)
		}
	}
	return ""
}

func jsonData(ev wire.Event, v any) error { return json.Unmarshal(ev.Data, v) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// fetchServer is the far end of the demo's fetch tasks: it counts the
// requests per idempotency key (the task ID) and path, and holds the first
// one open until released (the owner running it is killed meanwhile).
type fetchServer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []fetchRequest
	first    chan fetchRequest
	release  chan struct{}
}

type fetchRequest struct{ key, path, process string }

func newFetchServer(t *testing.T) *fetchServer {
	f := &fetchServer{first: make(chan fetchRequest, 1), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := fetchRequest{r.Header.Get("Idempotency-Key"), r.URL.Path, r.Header.Get("X-Baton-Process")}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		n := len(f.requests)
		f.mu.Unlock()
		if n == 1 {
			f.first <- req
			select {
			case <-f.release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write([]byte("fetched"))
	}))
	t.Cleanup(func() { close(f.release); f.srv.Close() })
	return f
}

func (f *fetchServer) all() []fetchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fetchRequest(nil), f.requests...)
}

// A fetch task (a registered kind with an input) whose owner process is
// SIGKILLed in the middle of it runs again on the peer with the same ID,
// kind and input; its result is applied once and task.completed carries
// it.
func TestTaskKilledMidTaskRunsOnPeer(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	log := filepath.Join(t.TempDir(), "effects.jsonl")
	fs := newFetchServer(t)
	procs := map[string]*proctest.Proc{"a": c.owner("a", "--effects-log", log)}
	id := c.start(protocol.StartRequest{})
	procs["b"] = c.owner("b", "--effects-log", log)
	c.send(id, harness.WithID("fetch", harness.Deliver("/fetch "+fs.srv.URL+"/page/1")))
	var first fetchRequest
	select {
	case first = <-fs.first:
	case <-time.After(wait):
		t.Fatal("the fetch task never ran")
	}
	runner := procs[first.process]
	if runner == nil {
		t.Fatalf("the first fetch came from process %q", first.process)
	}
	c.kill(runner)
	evs := c.waitKind(id, wire.EventTaskCompleted, 1)
	reqs := fs.all()
	if len(reqs) != 2 || reqs[1].key != first.key || reqs[1].path != "/page/1" || reqs[1].process == first.process {
		t.Fatalf("requests %+v: want the task again from the other process, same key and path", reqs)
	}
	var done []wire.TaskCompletedV2
	for _, ev := range evs {
		if ev.Kind == wire.EventTaskCompleted {
			var d wire.TaskCompletedV2
			_ = jsonData(ev, &d)
			done = append(done, d)
		}
	}
	var res demo.FetchResult
	if len(done) != 1 || done[0].Kind != demo.TaskFetch || done[0].TaskID != first.key || done[0].Error != "" ||
		jsonUnmarshal(done[0].Result, &res) != nil || res.Status != 200 || res.Bytes != len("fetched") {
		t.Fatalf("task.completed %+v, want one of kind fetch with the second run's result", done)
	}
	if got := effectsOf(t, log, id)[1]; len(got) != 1 || got[0].Key != first.key {
		t.Fatalf("fetch executions recorded %+v, want the completed one", got)
	}
	checkStream(t, c.events(id))
}
