package natstest

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"
)

// Requests counts the messages published on a subject (wildcards
// allowed) whose body contains a byte string, as a second connection
// receives them: a test counts the JetStream API requests an operation
// sends, such as leader reads ($JS.API.STREAM.MSG.GET.<stream>).
type Requests struct {
	nc   *nats.Conn
	msgs chan *nats.Msg
	want []byte
	n    int64
}

// CountRequests subscribes to subject on the server at url and counts the
// messages whose body contains want (nil: every message) from now on.
func CountRequests(t testing.TB, url, subject string, want []byte) *Requests {
	t.Helper()
	nc, _ := Connect(t, url)
	r := &Requests{nc: nc, msgs: make(chan *nats.Msg, 1024), want: want}
	if _, err := nc.ChanSubscribe(subject, r.msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Count is the messages counted so far. The server routes a request to
// this connection as it receives it, before it answers: once a request
// was answered, a flush of this connection (its PONG comes after every
// message routed before it, and the reading goroutine queues each on the
// channel in order) has it on the channel.
func (r *Requests) Count(t testing.TB) int64 {
	t.Helper()
	if err := r.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-r.msgs:
			if bytes.Contains(m.Data, r.want) {
				r.n++
			}
		default:
			return r.n
		}
	}
}
