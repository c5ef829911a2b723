package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Frame is one server-sent event as the wire carries it.
type Frame struct {
	ID    uint64 // the id: field (an event seq)
	HasID bool   // the frame had an id: line (a live event has none)
	Event string // the event: field (the event kind)
	Data  string // the data: lines, joined by newlines
}

// ReadFrames parses an SSE stream, calling frame for each event (false
// stops reading) and comment for each comment line (the heartbeat), until r
// ends.
func ReadFrames(r io.Reader, frame func(Frame) bool, comment func()) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var f Frame
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.Event != "" || len(data) > 0 {
				f.Data = strings.Join(data, "\n")
				if !frame(f) {
					return nil
				}
			}
			f, data = Frame{}, nil
		case strings.HasPrefix(line, ":"):
			if comment != nil {
				comment()
			}
		case strings.HasPrefix(line, "id: "):
			f.ID, _ = strconv.ParseUint(line[4:], 10, 64)
			f.HasID = true
		case strings.HasPrefix(line, "event: "):
			f.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:])
		}
	}
	return sc.Err()
}

// Stream is one SSE connection whose frames are read into a channel until
// the response ends.
type Stream struct {
	resp   *http.Response
	cancel context.CancelFunc
	frames chan Frame
	done   chan struct{}
	pings  atomic.Int64
}

// OpenSSE requests url (with opts: a token, headers) and starts reading
// frames; any answer but 200 text/event-stream is an error.
func OpenSSE(client *http.Client, url string, opts ...Option) (*Stream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	s := &Stream{resp: resp, cancel: cancel, frames: make(chan Frame, 4096), done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *Stream) read() {
	defer close(s.done)
	defer close(s.frames)
	_ = ReadFrames(s.resp.Body, func(f Frame) bool { s.frames <- f; return true }, func() { s.pings.Add(1) })
}

// Frames delivers the frames read; it is closed when the stream ends.
func (s *Stream) Frames() <-chan Frame { return s.frames }

// Pings is the number of heartbeat comments read.
func (s *Stream) Pings() int { return int(s.pings.Load()) }

// Close ends the connection and waits for the reader.
func (s *Stream) Close() {
	s.cancel()
	s.resp.Body.Close()
	for range s.frames { // unblock a reader waiting on a full channel
	}
	<-s.done
}

// Until reads frames until pred holds for the one just read and returns
// every frame read; an ended stream or the timeout is an error.
func (s *Stream) Until(timeout time.Duration, what string, pred func(Frame) bool) ([]Frame, error) {
	var got []Frame
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return got, fmt.Errorf("SSE stream ended before %s (got %d events)", what, len(got))
			}
			got = append(got, f)
			if pred(f) {
				return got, nil
			}
		case <-deadline.C:
			return got, fmt.Errorf("timed out waiting for %s on SSE (got %d events)", what, len(got))
		}
	}
}
