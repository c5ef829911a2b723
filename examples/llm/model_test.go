package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/openai/openai-go/v3/option"
)

// A 429 with Retry-After is retried after exactly the wait it names (and
// retry-after-ms, OpenAI's, wins over it), then the answer streams as usual.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		want   time.Duration
	}{
		{"seconds", []string{"Retry-After", "2"}, 2 * time.Second},
		{"milliseconds", []string{"Retry-After", "2", "Retry-After-Ms", "1500"}, 1500 * time.Millisecond},
		{"capped", []string{"Retry-After", "3600"}, DefaultRetryMaxWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, tm := newFake(t), newTimer()
			a := newAgent(t, f, tm)
			f.push(status(http.StatusTooManyRequests, tc.header...), stream(text("hello"), stop("stop"), usage(3, 1, 0)))
			r := step(t, a, newSink(), input(1, "", userText("hi")))
			if r.Outcome != runtime.OutcomeDone || r.Error != "" || f.count() != 2 {
				t.Fatalf("result %+v after %d requests, want done after 2", r, f.count())
			}
			if got := tm.all(); !slices.Equal(got, []time.Duration{tc.want}) {
				t.Fatalf("waits %v, want [%s]", got, tc.want)
			}
		})
	}
}

// The wait a 429 or 503 names: retry-after-ms first, then Retry-After in
// seconds (fractions too) or as an HTTP date; nothing usable is 0.
func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header []string
		want   time.Duration
	}{
		{[]string{"Retry-After", "7"}, 7 * time.Second},
		{[]string{"Retry-After", "0.25"}, 250 * time.Millisecond},
		{[]string{"Retry-After", "7", "Retry-After-Ms", "20"}, 20 * time.Millisecond},
		{[]string{"Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{[]string{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{[]string{"Retry-After", "soon"}, 0},
		{[]string{"Retry-After", "-3"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for i := 0; i+1 < len(tc.header); i += 2 {
			h.Set(tc.header[i], tc.header[i+1])
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.header, got, tc.want)
		}
	}
}

// A model that keeps answering 500 costs the bounded retries — each wait
// of the exponential backoff within its cap — and then fails the step with
// model_unavailable; so does a 503 and a refused connection. A 400 or a
// 401 fails it at once with model_refused.
func TestModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reply    reply
		code     string
		requests int
	}{
		{"500", status(http.StatusInternalServerError), CodeModelUnavailable, 3},
		{"503 plain text", func(x *exchange) { http.Error(x.w, "upstream down", http.StatusServiceUnavailable) }, CodeModelUnavailable, 3},
		{"400", status(http.StatusBadRequest), CodeModelRefused, 1},
		{"401", status(http.StatusUnauthorized), CodeModelRefused, 1},
		{"404 unknown model", status(http.StatusNotFound), CodeModelRefused, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, tm := newFake(t), newTimer()
			a := newAgent(t, f, tm, func(c *Config) { c.Retries, c.RetryFirstWait, c.RetryMaxWait = 2, time.Second, 3*time.Second })
			for range tc.requests {
				f.push(tc.reply)
			}
			r := step(t, a, nil, input(1, "", userText("hi")))
			if r.Code != tc.code || f.count() != tc.requests {
				t.Fatalf("result %+v after %d requests, want code %s after %d", r, f.count(), tc.code, tc.requests)
			}
			waits := tm.all()
			if len(waits) != tc.requests-1 {
				t.Fatalf("waits %v, want %d", waits, tc.requests-1)
			}
			for _, w := range waits {
				if w <= 0 || w > 3*time.Second {
					t.Fatalf("waits %v: each within (0, 3s]", waits)
				}
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		tm := newTimer()
		a := newAgent(t, newFake(t), tm, func(c *Config) {
			c.Retries, c.Options = 1, []option.RequestOption{option.WithBaseURL("http://127.0.0.1:1/v1"), option.WithAPIKey("k")}
		})
		r := step(t, a, nil, input(1, "", userText("hi")))
		if r.Code != CodeModelUnavailable || len(tm.all()) != 1 || !strings.Contains(r.Error, "gave up after 2 attempts") {
			t.Fatalf("result %+v, waits %v: want model_unavailable after one retry", r, tm.all())
		}
	})
}

// A malformed answer fails the step with model_invalid_response at once,
// never retried: a chunk that is not JSON, a chunk with neither choices
// nor usage, a stream without any choice, a tool call without a name.
func TestMalformedResponse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply reply
		why   string
	}{
		{"not JSON", stream(text("Hel"), `{"id": "x", "choices": [{"index": 0, "delta": {"content": "lo`), "not JSON"},
		{"no choices", stream(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m"}`), "without choices or usage"},
		{"choices not a list", stream(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":{"x":1}}`), "without choices or usage"},
		{"empty stream", stream(), "without an answer"},
		{"usage only", stream(usage(1, 1, 0)), "without an answer"},
		{"nameless tool call", stream(callStart(0, "c1", "", `{}`), stop("tool_calls")), "names no function"},
		{"HTML", func(x *exchange) { x.w.Header().Set("Content-Type", "text/html"); x.w.Write([]byte("<html>hi</html>")) }, `the answer is "text/html", not an event stream`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, tm := newFake(t), newTimer()
			a := newAgent(t, f, tm)
			f.push(tc.reply)
			r := step(t, a, newSink(), input(1, "", userText("hi")))
			if r.Code != CodeModelInvalidResponse || !strings.Contains(r.Error, tc.why) || f.count() != 1 || len(tm.all()) != 0 {
				t.Fatalf("result %+v after %d requests, waits %v: want %s (%q) at once", r, f.count(), tm.all(), CodeModelInvalidResponse, tc.why)
			}
		})
	}
}

// A stream cut off (or an error event in it) before any text went live is
// retried; once text went live, a cut fails the step with
// model_unavailable instead (a retry would show the answer twice; the
// runtime discards the step's deltas).
func TestStreamCutOff(t *testing.T) {
	cut := func(chunks ...string) reply {
		return func(x *exchange) {
			x.send(chunks...)
			conn, buf, err := x.w.(http.Hijacker).Hijack()
			if err == nil {
				_ = buf.Flush()
				conn.Close()
			}
		}
	}
	f, tm := newFake(t), newTimer()
	a := newAgent(t, f, tm)
	f.push(cut(callStart(0, "c1", "calculator", `{"expr`)), stream(text("ok"), stop("stop")))
	if r := step(t, a, newSink(), input(1, "", userText("hi"))); r.Outcome != runtime.OutcomeDone || f.count() != 2 {
		t.Fatalf("cut off before any text: %+v after %d requests, want done after a retry", r, f.count())
	}
	f.push(stream(`{"error":{"message":"overloaded","type":"server_error"}}`), stream(text("ok"), stop("stop")))
	if r := step(t, a, newSink(), input(1, "", userText("hi"))); r.Outcome != runtime.OutcomeDone || f.count() != 4 {
		t.Fatalf("an error event before any text: %+v after %d requests, want done after a retry", r, f.count())
	}
	f.push(cut(text("Hel")), stream(text("Hello"), stop("stop")))
	s := newSink()
	r := step(t, a, s, input(1, "", userText("hi")))
	if r.Code != CodeModelUnavailable || f.count() != 5 || !slices.Equal(s.all(), []string{"Hel"}) {
		t.Fatalf("cut off after text: %+v after %d requests, deltas %q; want model_unavailable, no retry", r, f.count(), s.all())
	}
}

// Cancelling the step's context mid-stream aborts the HTTP request (the
// fake sees its request's context end) and Step returns the context's
// error, no result.
func TestCancelMidStream(t *testing.T) {
	f := newFake(t)
	a := newAgent(t, f, newTimer())
	aborted := make(chan struct{})
	f.push(func(x *exchange) {
		x.send(text("Thinking"))
		if x.hold() {
			close(aborted)
		}
	})
	s := newSink()
	ctx, cancel := context.WithCancel(runtime.WithSink(t.Context(), s))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.Step(ctx, input(1, "", userText("hi")))
		done <- err
	}()
	select {
	case <-s.each:
	case <-time.After(30 * time.Second):
		t.Fatal("no delta within 30s")
	}
	cancel()
	for what, ch := range map[string]<-chan struct{}{"the fake to see the request aborted": aborted} {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Step: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Step did not return within 30s of the cancel")
	}
}
