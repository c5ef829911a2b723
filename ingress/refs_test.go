package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Output larger than the inline limit is stored out of line by the owner;
// SSE and ?follow=false serve it inline: the envelope as stored, its data
// exactly the inline form {"turnId","text"}. Each blob is fetched once
// however many readers there are; other events pass byte for byte.
func TestOutputRefResolved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, size := range []int{17 << 10, 300 << 10, 895 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			w := e.session(t, fmt.Sprintf("big-%d", size))
			content := text(size)
			live := e.sse("/v1/sessions/" + w.id + "/events")
			stored := w.outputWithBlob(t, content)
			want := inlineData(t, content)
			got := until(t, live, 20*time.Second, "seq 3", func(ev harness.Frame) bool { return ev.ID == 3 })
			checkServed(t, sseData(got), stored, want)
			checkServed(t, e.rawEvents(t, w.id), stored, want)
			second := e.sse("/v1/sessions/" + w.id + "/events")
			got = until(t, second, 20*time.Second, "seq 3", func(ev harness.Frame) bool { return ev.ID == 3 })
			checkServed(t, sseData(got), stored, want)
		})
	}
	if n := fetches(t, e, "ok"); n != 3 {
		t.Fatalf("%v successful blob fetches, want 3 (one per blob, whatever the readers)", n)
	}
}

// Many clients of one session joining at once read one fetch of the blob.
func TestOutputRefOneFetch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.session(t, "fan")
	content := text(300 << 10)
	clients := make([]*harness.Stream, 8)
	for i := range clients {
		clients[i] = e.sse("/v1/sessions/" + w.id + "/events")
	}
	stored := w.outputWithBlob(t, content)
	want := inlineData(t, content)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			got := until(t, c, 20*time.Second, "seq 3", func(ev harness.Frame) bool { return ev.ID == 3 })
			checkServed(t, sseData(got), stored, want)
		})
	}
	wg.Wait()
	if n := fetches(t, e, "ok"); n != 1 {
		t.Fatalf("%v blob fetches for %d clients, want 1", n, len(clients))
	}
}

// A ref whose blob is missing, corrupt (digest mismatch) or over the inline
// limit is served as stored, ref and all; the stream goes on and the
// failure is logged once.
func TestOutputRefUnresolved(t *testing.T) {
	t.Parallel()
	warns := &warnCounter{n: map[string]int{}}
	e := newEnv(t, func(c *ingress.Config) { c.Log = slog.New(counting{c.Log.Handler(), warns}) })
	content := text(40 << 10)
	ref := wire.NewBlobRef([]byte(content))
	latin1 := bytes.Repeat([]byte("caf\xe9 "), 4<<10) // matches its ref, but is not UTF-8
	cases := []struct {
		name   string
		ref    wire.BlobRef
		blob   []byte // stored under the ref's name (nil: none)
		result string // the fetch result counted ("": no fetch)
	}{
		{"missing", ref, nil, "missing"},
		{"corrupt", ref, []byte(strings.ToUpper(content)), "corrupt"},
		{"truncated", ref, []byte(content[:len(content)-1]), "corrupt"},
		{"not-text", wire.NewBlobRef(latin1), latin1, "corrupt"},
		{"over-limit", wire.BlobRef{Digest: wire.Digest([]byte("x")), Size: ingress.MaxInlineOutput + 1}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := e.session(t, tc.name)
			before := fetches(t, e, tc.result)
			if tc.blob != nil {
				w.putBlob(t, tc.ref, tc.blob)
			}
			stored := w.output(t, tc.ref)
			for range 2 {
				c := e.sse("/v1/sessions/" + w.id + "/events")
				got := until(t, c, 20*time.Second, "seq 3", func(ev harness.Frame) bool { return ev.ID == 3 })
				checkStored(t, sseData(got), stored)
				checkStored(t, e.rawEvents(t, w.id), stored)
			}
			name := wire.BlobName(w.id, tc.ref)
			if tc.result == "" {
				if n := warns.count(name); n != 0 {
					t.Fatalf("%d warnings for %s, want none (not fetched)", n, name)
				}
				return
			}
			if n := warns.count(name); n != 1 {
				t.Fatalf("%d warnings for %s, want 1", n, name)
			}
			if fetches(t, e, tc.result) == before {
				t.Fatalf("no %s fetch counted", tc.result)
			}
		})
	}
	if n := fetches(t, e, "ok"); n != 0 {
		t.Fatalf("%v blobs resolved, want none", n)
	}
}

// writer appends one session's events the way the owner does, with a
// session record present.
type writer struct {
	e         *env
	id        string
	seq       uint64
	streamSeq uint64
}

func (e *env) session(t *testing.T, id string) *writer {
	t.Helper()
	rec := record.SessionRecord{
		SessionID: id, OwnerRunID: "run-1", DeploymentID: "v1", Epoch: 1, OwnerProcess: "p1",
		State: record.StateActive, Consumer: subjects.Consumer(id, 1), WireV: wire.CurrentVersion,
		Writer: "run-1", WriteCounter: 1,
	}
	if _, err := e.Store.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return &writer{e: e, id: id}
}

// outputWithBlob stores content out of line, then appends a turn with its
// output by ref: seq 1 turn.started, 2 message.output, 3 turn.completed.
func (w *writer) outputWithBlob(t *testing.T, content string) [][]byte {
	t.Helper()
	ref := wire.NewBlobRef([]byte(content))
	w.putBlob(t, ref, []byte(content))
	return w.output(t, ref)
}

// output appends a turn whose output is ref, returning the stored events.
func (w *writer) output(t *testing.T, ref wire.BlobRef) [][]byte {
	t.Helper()
	return [][]byte{
		w.append(t, wire.EventTurnStarted, wire.TurnStarted{TurnID: "t1"}),
		w.append(t, wire.EventMessageOutput, wire.MessageOutput{TurnID: "t1", Ref: &ref}),
		w.append(t, wire.EventTurnCompleted, wire.TurnCompleted{TurnID: "t1"}),
	}
}

func (w *writer) putBlob(t *testing.T, ref wire.BlobRef, content []byte) {
	t.Helper()
	obs, err := w.e.JS.ObjectStore(t.Context(), w.e.Names.StateBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(t.Context(), wire.BlobName(w.id, ref), content); err != nil {
		t.Fatal(err)
	}
}

// append publishes the next event as the owner's appender does: header
// Baton-Event-Seq, message ID <sessionID>/<seq>, expected last subject
// sequence.
func (w *writer) append(t *testing.T, kind string, data any) []byte {
	t.Helper()
	ev, err := wire.NewEvent(kind, data)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := data.(wire.EventBody); ok {
		ev.V = wire.DataVersionOf(b)
	}
	w.seq++
	ev.SessionID, ev.Seq, ev.Time, ev.OwnerRunID, ev.DeploymentID = w.id, w.seq, time.Now(), "run-1", "v1"
	b, err := wire.EncodeEvent(wire.DefaultEvents(), ev)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(w.e.Names.Events(w.id))
	msg.Data = b
	msg.Header.Set(wire.HeaderEventSeq, strconv.FormatUint(w.seq, 10))
	ack, err := w.e.JS.PublishMsg(t.Context(), msg,
		jetstream.WithMsgID(w.id+"/"+strconv.FormatUint(w.seq, 10)),
		jetstream.WithExpectLastSequencePerSubject(w.streamSeq))
	if err != nil {
		t.Fatal(err)
	}
	w.streamSeq = ack.Sequence
	return b
}

// rawEvents reads ?follow=false as raw envelopes (a resolved envelope is
// larger than wire.DecodeEvent accepts).
func (e *env) rawEvents(t *testing.T, id string) [][]byte {
	t.Helper()
	code, b := e.call(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false", "", testToken)
	if code != http.StatusOK {
		t.Fatalf("events %s = %d %s", id, code, b)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		t.Fatalf("events %s: %v", id, err)
	}
	out := make([][]byte, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}

func sseData(evs []harness.Frame) [][]byte {
	out := make([][]byte, len(evs))
	for i, ev := range evs {
		out[i] = []byte(ev.Data)
	}
	return out
}

// checkServed checks that the output event (the second) is served with
// data exactly want and every other member as stored, and that the other
// events are served byte for byte as stored.
func checkServed(t *testing.T, got, stored [][]byte, want []byte) {
	t.Helper()
	if len(got) != len(stored) {
		t.Fatalf("%d events served, want %d", len(got), len(stored))
	}
	for i := range got {
		if i != 1 && !bytes.Equal(got[i], stored[i]) {
			t.Fatalf("event %d served as %s, stored as %s", i+1, got[i], stored[i])
		}
	}
	g, s := envelopeMembers(t, got[1]), envelopeMembers(t, stored[1])
	if !bytes.Equal(g["data"], want) {
		t.Fatalf("output data served as %.200s…, want %.200s… (%d and %d bytes)", g["data"], want, len(g["data"]), len(want))
	}
	delete(g, "data")
	delete(s, "data")
	if len(g) != len(s) {
		t.Fatalf("output envelope has %d other members, stored %d", len(g), len(s))
	}
	for k, v := range s {
		if !bytes.Equal(g[k], v) {
			t.Fatalf("output envelope member %s served as %s, stored as %s", k, g[k], v)
		}
	}
}

// checkStored checks that every event is served byte for byte as stored.
func checkStored(t *testing.T, got, stored [][]byte) {
	t.Helper()
	if len(got) != len(stored) {
		t.Fatalf("%d events served, want %d", len(got), len(stored))
	}
	for i := range got {
		if !bytes.Equal(got[i], stored[i]) {
			t.Fatalf("event %d served as %s, stored as %s", i+1, got[i], stored[i])
		}
	}
}

func envelopeMembers(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("envelope %.200s: %v", b, err)
	}
	return m
}

// inlineData is the data the owner would have written inline.
func inlineData(t *testing.T, content string) []byte {
	t.Helper()
	ev, err := wire.NewEvent(wire.EventMessageOutput, wire.MessageOutput{TurnID: "t1", Text: content})
	if err != nil {
		t.Fatal(err)
	}
	return ev.Data
}

// text is n bytes of UTF-8 text with what JSON must escape and what it
// must not (quotes, newlines, HTML characters, multi-byte runes).
func text(n int) string {
	const line = "Line %06d: \"quoted\" <b>&amp;</b> tab\there, naïve café, 日本語, 🎉\\n\n"
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, line, i)
	}
	s := b.String()[:n]
	for !utf8.ValidString(s) { // a rune cut in two
		s = s[:len(s)-1]
	}
	return s + strings.Repeat(".", n-len(s))
}

// fetches reads baton_ingress_blob_fetches_total{result}.
func fetches(t *testing.T, e *env, result string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baton_ingress_blob_fetches_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// warnCounter counts WARN records by their "object" attribute.
type warnCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *warnCounter) record(r slog.Record) {
	if r.Level != slog.LevelWarn {
		return
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "object" {
			c.mu.Lock()
			c.n[a.Value.String()]++
			c.mu.Unlock()
		}
		return true
	})
}

func (c *warnCounter) count(object string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[object]
}

// counting is a handler that counts WARN records in c.
type counting struct {
	slog.Handler
	c *warnCounter
}

func (h counting) Handle(ctx context.Context, r slog.Record) error {
	h.c.record(r)
	return h.Handler.Handle(ctx, r)
}

func (h counting) WithAttrs(as []slog.Attr) slog.Handler {
	return counting{h.Handler.WithAttrs(as), h.c}
}

func (h counting) WithGroup(name string) slog.Handler {
	return counting{h.Handler.WithGroup(name), h.c}
}

// A task result stored out of line (task.completed's resultRef) is served
// inline: data's resultRef replaced by the result as JSON, on SSE and
// ?follow=false.
func TestTaskResultRefResolved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.session(t, "big-task-result")
	result := []byte(`{"rows":["` + strings.Repeat("r", 40<<10) + `"]}`)
	ref := wire.NewBlobRef(result)
	w.putBlob(t, ref, result)
	w.append(t, wire.EventTaskCompleted, wire.TaskCompletedV2{TaskID: "k1", Kind: "fetch", ResultRef: &ref})
	live := e.sse("/v1/sessions/" + w.id + "/events")
	got := until(t, live, 20*time.Second, "seq 1", func(ev harness.Frame) bool { return ev.ID == 1 })
	for _, served := range [][]byte{[]byte(got[len(got)-1].Data), e.rawEvents(t, w.id)[0]} {
		var env struct {
			Kind string
			Data map[string]json.RawMessage
		}
		if err := json.Unmarshal(served, &env); err != nil || env.Kind != wire.EventTaskCompleted {
			t.Fatalf("served %.200s: %v", served, err)
		}
		if _, ok := env.Data["resultRef"]; ok || !bytes.Equal(env.Data["result"], result) || string(env.Data["kind"]) != `"fetch"` {
			t.Fatalf("served data members %v, want the result inline and no resultRef", len(env.Data))
		}
	}
}
