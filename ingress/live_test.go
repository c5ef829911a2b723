package ingress_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// liveData is the data of a live frame.
type liveData struct {
	TurnID string `json:"turnId"`
	Step   uint64 `json:"step"`
	Text   string `json:"text"`
}

// liveOf checks a live SSE frame's exact shape — no id: line, the
// envelope's members exactly sessionId, kind, time, deploymentId and data,
// data's exactly turnId, step (and text for a delta) — and returns its data.
func liveOf(t *testing.T, f harness.Frame, id, deployment string) liveData {
	t.Helper()
	if f.HasID {
		t.Fatalf("live frame %s has an id: line (id %d)", f.Event, f.ID)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal([]byte(f.Data), &env); err != nil {
		t.Fatalf("live frame data %q: %v", f.Data, err)
	}
	if got := slices.Sorted(maps.Keys(env)); !slices.Equal(got, []string{"data", "deploymentId", "kind", "sessionId", "time"}) {
		t.Fatalf("live envelope members %v, want exactly sessionId, kind, time, deploymentId, data", got)
	}
	var head struct {
		SessionID, Kind, DeploymentID string
		Time                          time.Time
	}
	_ = json.Unmarshal([]byte(f.Data), &head)
	if head.SessionID != id || head.Kind != f.Event || head.DeploymentID != deployment || head.Time.IsZero() {
		t.Fatalf("live envelope %s, want session %s, kind %s, deployment %s and a time", f.Data, id, f.Event, deployment)
	}
	var data map[string]json.RawMessage
	_ = json.Unmarshal(env["data"], &data)
	want := []string{"step", "turnId"}
	if f.Event == wire.EventMessageDelta {
		want = []string{"step", "text", "turnId"}
	}
	if got := slices.Sorted(maps.Keys(data)); !slices.Equal(got, want) {
		t.Fatalf("%s data members %v, want %v", f.Event, got, want)
	}
	var d liveData
	_ = json.Unmarshal(env["data"], &d)
	if d.TurnID == "" || d.Step == 0 {
		t.Fatalf("%s data %s without turnId or step", f.Event, env["data"])
	}
	return d
}

// liveSession is an env with an owner of v1 and a session of alias, and
// the session's SSE stream.
func liveSession(t *testing.T, alias string) (*env, string, *harness.Stream) {
	t.Helper()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(jsonBody(map[string]string{"alias": alias})).SessionID
	return e, id, e.sse("/v1/sessions/" + id + "/events")
}

// deltasBefore checks the frames up to the output of text: its step's
// deltas (at least min) come before it and concatenate to it. It returns
// the deltas' data.
func deltasBefore(t *testing.T, frames []harness.Frame, id, deployment, text string, min int) []liveData {
	t.Helper()
	var ds []liveData
	var joined strings.Builder
	for _, f := range frames {
		if f.Event == wire.EventMessageDelta {
			d := liveOf(t, f, id, deployment)
			ds = append(ds, d)
			joined.WriteString(d.Text)
		}
	}
	if len(ds) < min || joined.String() != text {
		t.Fatalf("%d deltas %q before the output, want ≥ %d concatenating to %q", len(ds), joined.String(), min, text)
	}
	for _, d := range ds {
		if d.TurnID != ds[0].TurnID || d.Step != ds[0].Step {
			t.Fatalf("deltas of several steps before one output: %+v", ds)
		}
	}
	return ds
}

// A streaming step's deltas reach SSE as message.delta frames without an
// id: line, in the documented shape, before the step's durable output,
// and concatenate to it. A client reconnecting with Last-Event-ID gets
// the durable events after it only: no delta again, no duplicate.
func TestLiveDeltasOnSSE(t *testing.T) {
	t.Parallel()
	e, id, c := liveSession(t, "live-1")
	const text = "/stream the quick brown fox"
	e.deliver(jsonBody(map[string]string{"sessionId": id, "text": text}))
	frames := until(t, c, 20*time.Second, "the output", isOutput(text))
	ds := deltasBefore(t, frames, id, "v1", text, 2)
	rest := until(t, c, 20*time.Second, "turn.completed", func(f harness.Frame) bool { return f.Event == wire.EventTurnCompleted })
	var step wire.TurnStep
	for _, f := range rest {
		if f.Event == wire.EventTurnStep {
			var env struct{ Data wire.TurnStep }
			_ = json.Unmarshal([]byte(f.Data), &env)
			step = env.Data
		}
	}
	if step.TurnID != ds[0].TurnID || step.Step != ds[0].Step {
		t.Fatalf("deltas of %s/%d, the committed step %+v", ds[0].TurnID, ds[0].Step, step)
	}
	last := rest[len(rest)-1].ID
	c.Close()

	again := e.sse("/v1/sessions/"+id+"/events", "Last-Event-ID", fmt.Sprint(last))
	const next = "/stream jumps over"
	e.deliver(jsonBody(map[string]string{"sessionId": id, "text": next}))
	frames = until(t, again, 20*time.Second, "the next output", isOutput(next))
	want := last + 1
	for _, f := range frames {
		if f.HasID {
			if f.ID != want {
				t.Fatalf("after Last-Event-ID %d: event id %d, want %d (no duplicate, no gap)", last, f.ID, want)
			}
			want++
		}
	}
	deltasBefore(t, frames, id, "v1", next, 2)
}

// A cancelled streaming step ends with message.discarded of its step on
// SSE, then turn.cancelled.
func TestLiveDiscardedOnCancel(t *testing.T) {
	t.Parallel()
	e, id, c := liveSession(t, "live-cancel")
	e.deliver(jsonBody(map[string]string{"sessionId": id, "text": "/streamsleep 1h a b c"}))
	first := until(t, c, 20*time.Second, "a delta", func(f harness.Frame) bool { return f.Event == wire.EventMessageDelta })
	d := liveOf(t, first[len(first)-1], id, "v1")
	e.must("/v1/sessions/"+id+"/cancel", `{}`, http.StatusAccepted, nil)
	frames := until(t, c, 20*time.Second, "turn.cancelled", func(f harness.Frame) bool { return f.Event == wire.EventTurnCancelled })
	discarded := -1
	for i, f := range frames {
		if f.Event == wire.EventMessageDiscarded {
			if got := liveOf(t, f, id, "v1"); got.TurnID != d.TurnID || got.Step != d.Step {
				t.Fatalf("message.discarded %+v, want the streaming step %s/%d", got, d.TurnID, d.Step)
			}
			discarded = i
		}
		if f.Event == wire.EventMessageOutput {
			t.Fatalf("a cancelled step's output was committed: %s", f.Data)
		}
	}
	if discarded < 0 {
		t.Fatalf("no message.discarded before turn.cancelled: %v", events(frames))
	}
}

// The gate: a delta of a step whose durable events the connection has
// sent is not sent (it lost a race), a delta of a later step is; live
// messages that are malformed, of another session or of an unknown kind
// are not sent at all.
func TestLiveLateDeltaNotSent(t *testing.T) {
	t.Parallel()
	e, id, c := liveSession(t, "live-late")
	e.deliver(jsonBody(map[string]string{"sessionId": id, "text": "/stream one two"}))
	frames := until(t, c, 20*time.Second, "turn.completed", func(f harness.Frame) bool { return f.Event == wire.EventTurnCompleted })
	var turn string
	for _, f := range frames {
		if f.Event == wire.EventMessageDelta {
			turn = liveOf(t, f, id, "v1").TurnID
		}
	}
	publish := func(body any, session string) {
		msg, err := wire.EncodeLive(session, "v1", time.Now(), body)
		harness.For(t).Check(err)
		harness.For(t).Check(e.NC.Publish(e.Names.Live(id), msg))
	}
	publish(wire.MessageDelta{TurnID: turn, Step: 1, Text: "late"}, id)
	publish(wire.MessageDelta{TurnID: "t99", Step: 1, Text: "other session"}, "01OTHERSESSION0000000000AA")
	harness.For(t).Check(e.NC.Publish(e.Names.Live(id), []byte(`{"sessionId":"`+id+`","kind":"message.delta","data":{"turnId":"t9"}}`)))
	harness.For(t).Check(e.NC.Publish(e.Names.Live(id), []byte(`{"sessionId":"`+id+`","kind":"message.future","data":{"turnId":"t9","step":1}}`)))
	publish(wire.MessageDelta{TurnID: "t99", Step: 1, Text: "fresh"}, id)
	got := until(t, c, 20*time.Second, "the fresh delta", func(f harness.Frame) bool { return f.Event == wire.EventMessageDelta })
	var live []harness.Frame
	for _, f := range got {
		if !f.HasID {
			live = append(live, f)
		}
	}
	if len(live) != 1 || liveOf(t, live[0], id, "v1").Text != "fresh" {
		t.Fatalf("frames after the committed turn: %v, want only the fresh delta live", events(got))
	}
}

// A client that never reads while more than 10 MB of deltas stream holds
// up neither the owner's commits nor another client's durable events: the
// other client receives every turn's turn.completed, and the session
// settles.
func TestLiveSlowClientDropsDeltasOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"live-slow"}`).SessionID
	slow := stall(t, e, "/v1/sessions/"+id+"/events")
	defer slow.Close()
	fast := e.sse("/v1/sessions/" + id + "/events")
	const turns = 12 // of 1 MiB of deltas each (the demo's /flood)
	for i := range turns {
		e.deliver(jsonBody(map[string]string{"sessionId": id, "text": "/flood 1048576", "idempotencyKey": fmt.Sprint("slow-", i)}))
	}
	completed, deltaBytes := 0, 0
	until(t, fast, 120*time.Second, "every turn completed", func(f harness.Frame) bool {
		switch f.Event {
		case wire.EventTurnCompleted:
			completed++
		case wire.EventMessageDelta:
			deltaBytes += len(f.Data)
		}
		return completed == turns
	})
	e.eventually(30*time.Second, "the session idle", func() bool { return e.status(id).Idle })
	// Deltas flowed to the reading client (how many it could take on this
	// machine is not a property; that some did is).
	t.Logf("the reading client received %d bytes of delta frames", deltaBytes)
	if deltaBytes == 0 {
		t.Fatal("the reading client received no delta")
	}
}

// stall opens an SSE request on a raw connection and never reads it.
func stall(t *testing.T, e *env, path string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(e.ing.URL(), "http://")
	conn, err := net.Dial("tcp", addr)
	harness.For(t).Check(err)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken + "\r\nAccept: text/event-stream\r\n\r\n"
	_, err = conn.Write([]byte(req))
	harness.For(t).Check(err)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	return conn
}

// Deltas across a handoff and a reconnect: a turn on v1, a client
// reconnecting with Last-Event-ID, then a turn through v2's ingress that
// hands the session to v2. The reconnected client sees every durable
// event once, in order from its cursor, and v2's deltas before v2's
// output.
func TestLiveAcrossHandoffAndReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	cfg := ingress.Config{Deployment: "v2", InsecureDev: true, StartTimeout: 10 * time.Second, HubLinger: 100 * time.Millisecond}
	v2 := e.h.Ingress(e.URL, cfg)
	id := e.create(`{"alias":"live-handoff"}`).SessionID
	c := e.sse("/v1/sessions/" + id + "/events")
	const one = "/stream on blue"
	e.deliver(jsonBody(map[string]string{"sessionId": id, "text": one}))
	frames := until(t, c, 20*time.Second, "v1's output", isOutput(one))
	deltasBefore(t, frames, id, "v1", one, 2)
	frames = until(t, c, 20*time.Second, "v1's turn.completed", func(f harness.Frame) bool { return f.Event == wire.EventTurnCompleted })
	last := frames[len(frames)-1].ID
	c.Close()

	again := e.sse("/v1/sessions/"+id+"/events", "Last-Event-ID", fmt.Sprint(last))
	const two = "/stream now on green"
	var r ingress.Receipt
	harness.For(t).Check(e.http.Call(t.Context(), http.MethodPost, v2.URL()+"/v1/deliveries",
		map[string]string{"sessionId": id, "text": two}, http.StatusAccepted, &r))
	frames = until(t, again, 30*time.Second, "v2's output", isOutput(two))
	deltasBefore(t, frames, id, "v2", two, 2)
	want, handoff := last+1, false
	for _, f := range frames {
		if !f.HasID {
			continue
		}
		if f.ID != want {
			t.Fatalf("after Last-Event-ID %d: event id %d, want %d (no duplicate, no gap)", last, f.ID, want)
		}
		want++
		handoff = handoff || f.Event == wire.EventHandoffCompleted
	}
	if !handoff {
		t.Fatalf("no handoff.completed between the turns: %v", events(frames))
	}
}

func events(frames []harness.Frame) []string {
	var out []string
	for _, f := range frames {
		out = append(out, f.Event)
	}
	return out
}
