package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client is an HTTP client of the ingress API.
type Client struct {
	HTTP *http.Client // default http.DefaultClient
}

// Response is an answer, read whole.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

// StatusError is an answer of another status than wanted.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// Option adds to a request.
type Option func(*http.Request)

// Bearer sends token as the bearer token ("" sends none).
func Bearer(token string) Option {
	return func(r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
}

// Header sets a request header.
func Header(key, value string) Option { return func(r *http.Request) { r.Header.Set(key, value) } }

// Headers sets header pairs key, value, key, value, ….
func Headers(kv ...string) Option {
	return func(r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
	}
}

// Do sends a request with body as is (nil: none) and reads the answer. A
// body goes as Content-Type application/json unless an option says
// otherwise (the API's bodies are JSON).
func (c *Client) Do(ctx context.Context, method, url string, body io.Reader, opts ...Option) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Code: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// DoJSON sends body as JSON (nil: no body) and reads the answer.
func (c *Client) DoJSON(ctx context.Context, method, url string, body any, opts ...Option) (Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(b)
		opts = append([]Option{Header("Content-Type", "application/json")}, opts...)
	}
	return c.Do(ctx, method, url, rd, opts...)
}

// Call sends body as JSON and decodes an answer of status want into out
// (nil: not decoded); another status is a *StatusError.
func (c *Client) Call(ctx context.Context, method, url string, body any, want int, out any, opts ...Option) error {
	r, err := c.DoJSON(ctx, method, url, body, opts...)
	if err != nil {
		return err
	}
	if r.Code != want {
		return &StatusError{Code: r.Code, Body: strings.TrimSpace(string(r.Body))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Body, out)
}

// Unavailable reports an error worth retrying while a stack starts: a
// transport error or a 503.
func Unavailable(err error) bool {
	var se *StatusError
	return err != nil && (!errors.As(err, &se) || se.Code == http.StatusServiceUnavailable)
}

// ServerError reports an error worth retrying with the same idempotency key
// while a node restarts or an owner is adopted: a transport error or a 5xx.
func ServerError(err error) bool {
	var se *StatusError
	return err != nil && (!errors.As(err, &se) || se.Code >= 500)
}

// Retry calls fn until it succeeds or fails with an error retryable does
// not accept, pausing pause between calls, for at most d (0: until ctx
// ends). It returns fn's last error.
func Retry(ctx context.Context, d, pause time.Duration, retryable func(error) bool, fn func() error) error {
	var end time.Time
	if d > 0 {
		end = time.Now().Add(d)
	}
	for {
		err := fn()
		if err == nil || !retryable(err) || !end.IsZero() && time.Now().After(end) {
			return err
		}
		if !Sleep(ctx, pause) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

// WaitReady retries GET base/readyz until it answers 200.
func (c *Client) WaitReady(ctx context.Context, base string, pause time.Duration) error {
	err := Retry(ctx, 0, pause, Unavailable, func() error { return c.Call(ctx, http.MethodGet, base+"/readyz", nil, http.StatusOK, nil) })
	if err != nil {
		return fmt.Errorf("%s/readyz: %w", base, err)
	}
	return nil
}
