package jsport_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
)

// TestReaderSurvivesAStall: a connection that carries nothing for longer
// than two heartbeats (a stalled process or server on a loaded machine)
// costs the reader one missed window, not its loss: the consumer still
// answers, so the reader goes on and delivers what was published during
// the stall. A consumer deleted while it is read still ends the reader
// (TestConformance "delete signals loss").
func TestReaderSurvivesAStall(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	srv := h.Server()
	e := h.Env(srv.URL())
	px := startStallProxy(t, srv.URL())
	r := h.Dial(px.url) // the reader's connection runs through the proxy
	in := jsport.Inbox{JS: r.JS, Names: e.Names}
	tok := "stall"
	publish := func(data string) uint64 {
		ack, err := e.JS.Publish(t.Context(), e.Names.Inbox(tok), []byte(data))
		h.Check(err)
		return ack.Sequence
	}
	first := publish("before")
	rd, err := in.Open(t.Context(), session.Cursor{Name: "c-stall", Tokens: []string{tok}, Start: 1, Fresh: true})
	h.Check(err)
	defer rd.Close()
	if d := <-rd.Deliveries(); d.Seq != first {
		t.Fatalf("first delivery %d, want %d", d.Seq, first)
	}
	// Stall the reader's connection for 3 s: longer than the 2 s window
	// after which the iterator reports a missing heartbeat, shorter than
	// that window and the 2 s the consumer has to answer.
	px.stall(3 * time.Second)
	second := publish("during the stall")
	select {
	case d := <-rd.Deliveries():
		if d.Seq != second {
			t.Fatalf("after the stall: delivery %d, want %d", d.Seq, second)
		}
	case err := <-rd.Lost():
		t.Fatalf("a stall lost the reader: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("nothing delivered after the stall")
	}
}

// TestReaderTakesABurst: what a stalled connection held arrives at once —
// the idle heartbeats of the waiting pull and the command published
// during the stall. The reader takes the command as delivered; it is not
// dropped by the client and redelivered by the server an ack wait later
// (the consumer counts no redelivery).
func TestReaderTakesABurst(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	srv := h.Server()
	e := h.Env(srv.URL())
	px := startStallProxy(t, srv.URL())
	in := jsport.Inbox{JS: h.Dial(px.url).JS, Names: e.Names}
	tok := "burst"
	rd, err := in.Open(t.Context(), session.Cursor{Name: "c-burst", Tokens: []string{tok}, Start: 1, Fresh: true})
	h.Check(err)
	defer rd.Close()
	for i := range 3 {
		// Idle heartbeats (one a second) pile up in the stall, then the
		// command.
		px.stall(2500 * time.Millisecond)
		time.Sleep(2200 * time.Millisecond)
		ack, err := e.JS.Publish(t.Context(), e.Names.Inbox(tok), []byte("during the stall"))
		h.Check(err)
		select {
		case d := <-rd.Deliveries():
			if d.Seq != ack.Sequence {
				t.Fatalf("burst %d: delivery %d, want %d", i, d.Seq, ack.Sequence)
			}
		case err := <-rd.Lost():
			t.Fatalf("burst %d lost the reader: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("burst %d: nothing delivered", i)
		}
		c, err := e.JS.Consumer(t.Context(), e.Names.InboxStream(), "c-burst")
		h.Check(err)
		info, err := c.Info(t.Context())
		h.Check(err)
		if info.NumRedelivered != 0 || info.Delivered.Consumer != uint64(i+1) {
			t.Fatalf("burst %d: the consumer redelivered (%d redelivered, %d deliveries for %d commands): the client dropped the command",
				i, info.NumRedelivered, info.Delivered.Consumer, i+1)
		}
	}
}

// TestReaderLostWhenDeletedInAStall: a consumer deleted while the
// reader's connection stalls still ends the reader — the stall does not
// make the reader wait on a consumer that is gone.
func TestReaderLostWhenDeletedInAStall(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	srv := h.Server()
	e := h.Env(srv.URL())
	px := startStallProxy(t, srv.URL())
	in := jsport.Inbox{JS: h.Dial(px.url).JS, Names: e.Names}
	rd, err := in.Open(t.Context(), session.Cursor{Name: "c-gone", Tokens: []string{"gone"}, Start: 1, Fresh: true})
	h.Check(err)
	defer rd.Close()
	px.stall(3 * time.Second)
	h.Check(jsport.Inbox{JS: e.JS, Names: e.Names}.Delete(t.Context(), "c-gone"))
	select {
	case d := <-rd.Deliveries():
		t.Fatalf("a delivery %d from a deleted consumer", d.Seq)
	case err := <-rd.Lost():
		if err == nil {
			t.Fatal("a nil loss")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a consumer deleted during a stall did not end its reader")
	}
}

// stallProxy forwards one TCP address to another; stall holds what the
// server sends to the client for a while (nothing is lost, only late).
type stallProxy struct {
	url   string
	mu    sync.Mutex
	until time.Time // when a stall ends
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := strings.TrimPrefix(target, "nats://")
	p := &stallProxy{url: "nats://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go func() { _, _ = io.Copy(s, c) }()
			go p.copyDown(c, s)
		}
	}()
	return p
}

// copyDown copies server → client, waiting out a stall before each write.
func (p *stallProxy) copyDown(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			wait := time.Until(p.until)
			p.mu.Unlock()
			if wait > 0 {
				time.Sleep(wait)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) stall(d time.Duration) {
	p.mu.Lock()
	p.until = time.Now().Add(d)
	p.mu.Unlock()
}
