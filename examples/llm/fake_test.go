package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// fake is an OpenAI-compatible Chat Completions server in its real wire
// format: each POST /v1/chat/completions is answered by the next reply
// pushed (a stream of chat.completion.chunk objects as server-sent events,
// or an HTTP error), and every request body is recorded.
type fake struct {
	t    testing.TB
	srv  *httptest.Server
	stop chan struct{} // closed when the test ends: replies still waiting give up

	mu       sync.Mutex
	replies  []reply
	requests []map[string]any
	arrived  chan int // the number of each request, as it arrives
}

// reply answers one request.
type reply func(x *exchange)

// exchange is one request being answered.
type exchange struct {
	f    *fake
	w    http.ResponseWriter
	r    *http.Request
	n    int // 1-based
	body map[string]any
}

func newFake(t testing.TB) *fake {
	f := &fake{t: t, stop: make(chan struct{}), arrived: make(chan int, 100)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.stop) }) // before Close: Close waits for the handlers
	return f
}

// options point a client at the fake.
func (f *fake) options() []option.RequestOption {
	return []option.RequestOption{option.WithBaseURL(f.srv.URL + "/v1"), option.WithAPIKey("test-key")}
}

// push queues replies for the next requests.
func (f *fake) push(rs ...reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, rs...)
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		f.t.Errorf("fake: a request body that is not JSON: %v: %s", err, b)
	}
	f.mu.Lock()
	f.requests = append(f.requests, body)
	n := len(f.requests)
	var rep reply
	if len(f.replies) > 0 {
		rep, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	f.arrived <- n
	if rep == nil {
		f.t.Errorf("fake: request %d has no reply queued", n)
		http.Error(w, `{"error":{"message":"no reply queued"}}`, http.StatusTeapot)
		return
	}
	rep(&exchange{f: f, w: w, r: r, n: n, body: body})
}

// request returns the body of request n (1-based).
func (f *fake) request(n int) map[string]any {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > len(f.requests) {
		f.t.Fatalf("fake: request %d of %d", n, len(f.requests))
	}
	return f.requests[n-1]
}

// count is the number of requests so far.
func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// messages returns the messages of request n as JSON, one per line.
func (f *fake) messages(n int) []string {
	f.t.Helper()
	msgs, _ := f.request(n)["messages"].([]any)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		b, _ := json.Marshal(m)
		out[i] = string(b)
	}
	return out
}

// send writes chunks as SSE events, each flushed.
func (x *exchange) send(chunks ...string) {
	if x.w.Header().Get("Content-Type") == "" {
		x.w.Header().Set("Content-Type", "text/event-stream")
		x.w.WriteHeader(http.StatusOK)
	}
	for _, c := range chunks {
		fmt.Fprintf(x.w, "data: %s\n\n", c)
	}
	x.w.(http.Flusher).Flush()
}

// done ends the stream: data: [DONE].
func (x *exchange) done() { x.send("[DONE]") }

// hold blocks until the client goes away (it returns true) or the test
// ends.
func (x *exchange) hold() bool {
	select {
	case <-x.r.Context().Done():
		return true
	case <-x.f.stop:
		return false
	}
}

// wait blocks until ch yields or the client goes away; false when it went
// away (or the test ended, or a minute passed).
func (x *exchange) wait(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-x.r.Context().Done():
	case <-x.f.stop:
	case <-time.After(time.Minute):
		x.f.t.Errorf("fake: request %d waited a minute", x.n)
	}
	return false
}

// stream is a reply of chunks, then [DONE].
func stream(chunks ...string) reply {
	return func(x *exchange) {
		x.send(chunks...)
		x.done()
	}
}

// status is a reply of an HTTP error with header pairs and an OpenAI
// error body.
func status(code int, header ...string) reply {
	return func(x *exchange) {
		for i := 0; i+1 < len(header); i += 2 {
			x.w.Header().Set(header[i], header[i+1])
		}
		x.w.Header().Set("Content-Type", "application/json")
		x.w.WriteHeader(code)
		fmt.Fprintf(x.w, `{"error":{"message":"fake %d","type":"fake_error","code":"fake"}}`, code)
	}
}

// chunk is a chat.completion.chunk with one choice of delta (and finish
// reason, "" for null).
func chunk(delta map[string]any, finish string) string {
	ch := map[string]any{"index": 0, "delta": delta, "finish_reason": nil}
	if finish != "" {
		ch["finish_reason"] = finish
	}
	return mustJSON(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
		"model": "fake-model", "choices": []any{ch}, "usage": nil})
}

// text is a content chunk.
func text(s string) string { return chunk(map[string]any{"role": "assistant", "content": s}, "") }

// stop is the chunk that ends an answer.
func stop(reason string) string { return chunk(map[string]any{}, reason) }

// callStart is the first fragment of tool call index: its ID and name, and
// the first piece of its arguments.
func callStart(index int, id, name, args string) string {
	return chunk(map[string]any{"tool_calls": []any{map[string]any{"index": index, "id": id, "type": "function",
		"function": map[string]any{"name": name, "arguments": args}}}}, "")
}

// callArgs is a later fragment of tool call index: more arguments.
func callArgs(index int, args string) string {
	return chunk(map[string]any{"tool_calls": []any{map[string]any{"index": index, "function": map[string]any{"arguments": args}}}}, "")
}

// usage is the last chunk of a stream with include_usage: no choices.
func usage(prompt, completion, cached int) string {
	return mustJSON(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion,
			"total_tokens": prompt + completion, "prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sink is a capturing runtime.Sink: every delta, in order, and a channel
// that yields each as it comes.
type sink struct {
	mu     sync.Mutex
	deltas []string
	each   chan string
}

func newSink() *sink { return &sink{each: make(chan string, 1000)} }

func (s *sink) Text(d string) {
	s.mu.Lock()
	s.deltas = append(s.deltas, d)
	s.mu.Unlock()
	select {
	case s.each <- d:
	default:
	}
}

func (s *sink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deltas...)
}

// timer is a backoff.Timer that fires at once and records each wait.
type timer struct {
	mu    sync.Mutex
	waits []time.Duration
	c     chan time.Time
}

func newTimer() *timer { return &timer{c: make(chan time.Time, 1)} }

func (t *timer) Start(d time.Duration) {
	t.mu.Lock()
	t.waits = append(t.waits, d)
	t.mu.Unlock()
	t.c <- time.Now()
}

func (*timer) Stop() {}

func (t *timer) C() <-chan time.Time { return t.c }

func (t *timer) all() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.waits...)
}
