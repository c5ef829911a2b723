package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/cenkalti/backoff/v4"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// call makes the step's model call, retrying within the step what may
// succeed later — 429, 5xx, a connection refused or cut off — as long as
// none of the answer was shown live yet: Retries times at most, each wait
// the server's Retry-After or else exponential (from RetryFirstWait,
// doubling, with jitter), never longer than RetryMaxWait. What is left
// failing is a *ModelError: CodeModelUnavailable once the retries are
// spent, CodeModelRefused and CodeModelInvalidResponse at once. A
// cancelled ctx ends it with ctx's error, the HTTP request aborted.
func (a *Agent) call(ctx context.Context, live runtime.Stream, req openai.ChatCompletionNewParams) (answer, error) {
	var hint time.Duration
	exp := backoff.NewExponentialBackOff(backoff.WithInitialInterval(a.cfg.RetryFirstWait),
		backoff.WithMaxInterval(a.cfg.RetryMaxWait), backoff.WithMaxElapsedTime(0))
	b := backoff.WithMaxRetries(backoff.WithContext(&hinted{BackOff: exp, hint: &hint, max: a.cfg.RetryMaxWait}, ctx), uint64(a.cfg.Retries))
	var r answer
	attempts := 0
	op := func() error {
		attempts++
		var err error
		r, err = a.stream(ctx, live, req)
		var me *ModelError
		if errors.As(err, &me) && me.Retry {
			hint = me.Wait
			return err
		}
		return backoff.Permanent(err)
	}
	notify := func(err error, wait time.Duration) {
		runtime.Logger(ctx).Warn("model call failed; retrying within the step", "attempt", attempts, "wait", wait.String(), "err", err)
	}
	err := backoff.RetryNotifyWithTimer(op, b, notify, a.cfg.timer)
	var me *ModelError
	if errors.As(err, &me) && me.Retry && ctx.Err() == nil {
		return r, &ModelError{Code: me.Code, Err: fmt.Errorf("gave up after %d attempts: %w", attempts, me.Err)}
	}
	return r, err
}

// hinted is the backoff of call: the exponential schedule, but the
// server's wait (Retry-After) when the last attempt named one, and never
// more than max.
type hinted struct {
	backoff.BackOff
	hint *time.Duration
	max  time.Duration
}

func (h *hinted) NextBackOff() time.Duration {
	d := h.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	if *h.hint > 0 {
		d, *h.hint = *h.hint, 0
	}
	return min(d, h.max)
}

// stream makes one streamed model call and assembles its answer; each
// piece of text goes to live as it arrives.
func (a *Agent) stream(ctx context.Context, live runtime.Stream, req openai.ChatCompletionNewParams) (answer, error) {
	var resp *http.Response
	s := a.client.Chat.Completions.NewStreaming(ctx, req, option.WithResponseInto(&resp))
	defer s.Close()
	var acc accumulator
	for s.Next() {
		if err := acc.add(s.Current(), live); err != nil {
			return answer{}, &ModelError{Code: CodeModelInvalidResponse, Err: err}
		}
	}
	if err := s.Err(); err != nil {
		return answer{}, classify(ctx, err, resp, acc.shown)
	}
	if ct := contentType(resp); !acc.choices && !strings.HasPrefix(ct, "text/event-stream") {
		return answer{}, &ModelError{Code: CodeModelInvalidResponse, Err: fmt.Errorf("%w: the answer is %q, not an event stream", ErrInvalidResponse, ct)}
	}
	return acc.answer()
}

func contentType(resp *http.Response) string {
	if resp == nil {
		return ""
	}
	return resp.Header.Get("Content-Type")
}

// classify turns a failed call into a *ModelError: by the HTTP status of
// an answer (429 and 5xx retried, honouring Retry-After; other 4xx
// refused), an unparsable chunk as invalid, anything else (a transport
// error, a stream cut off, an error event in the stream) as unavailable,
// retried only while no output was shown. ctx's own end is returned as is.
func classify(ctx context.Context, err error, resp *http.Response, shown bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if resp != nil && resp.StatusCode >= 400 {
		var apiErr *openai.Error
		switch {
		case !errors.As(err, &apiErr):
			err = fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
		case apiErr.Message != "": // the server's reason ("model not found")
			err = fmt.Errorf("%w: %.300s", err, apiErr.Message)
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return &ModelError{Code: CodeModelUnavailable, Retry: true, Wait: retryAfter(resp.Header, time.Now()), Err: err}
		}
		return &ModelError{Code: CodeModelRefused, Err: err}
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return &ModelError{Code: CodeModelInvalidResponse, Err: fmt.Errorf("%w: a chunk is not JSON: %w", ErrInvalidResponse, err)}
	}
	var sse *ssestream.StreamError
	if errors.As(err, &sse) {
		err = fmt.Errorf("the server sent an error: %.300s", bytes.TrimSpace(sse.Event.Data))
	}
	return &ModelError{Code: CodeModelUnavailable, Retry: !shown, Err: err}
}

// retryAfter is the wait a 429 or 503 asks for: retry-after-ms
// (OpenAI's), else Retry-After in seconds or as an HTTP date; 0 for none.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
