package eventlog

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// While other batches are in flight on the stream, the server sends a flow
// ack after every message of a batch, and all of them may arrive before
// the batch's goroutine reads one: the final PubAck behind them must still
// reach it (it was dropped once the channel held four replies, and the
// batch waited batchReplyWait for nothing).
func TestRouteKeepsTheFinalReplyBehindFlowAcks(t *testing.T) {
	b := &Batches{prefix: "_INBOX.test.", wait: map[string]chan routed{}}
	const id, n = "B1", 6
	ch, done := b.await(id, n)
	defer done()
	reply := func(k int, data string) {
		b.route(&nats.Msg{Subject: fmt.Sprintf("%s%s.%d.fail.%d.1.$FI", b.prefix, id, batchFlow, k), Data: []byte(data)})
	}
	// The server's replies, in its wire format: the first message's flow
	// settings, a flow ack after each message, a gap report, a refusal of
	// one message, then the final PubAck — none read until all are in.
	reply(1, `{"type":"ack","seq":0,"msgs":1}`)
	for k := 1; k <= n; k++ {
		reply(k, fmt.Sprintf(`{"type":"ack","seq":%d,"msgs":1}`, k))
	}
	reply(3, `{"type":"gap","last_seq":3,"seq":4}`)
	reply(5, `{"type":"err","seq":5,"error":{"code":400,"err_code":10071,"description":"wrong last sequence"}}`)
	reply(n, `{"stream":"EVENTS","seq":42,"batch":"B1","count":4}`)

	var got []batchReply
	for len(ch) > 0 {
		m := <-ch
		if m.err != nil {
			t.Fatalf("routed error: %v", m.err)
		}
		got = append(got, m.reply)
	}
	if len(got) != 2 || got[0].Type != flowErr || got[0].Error == nil || got[1].Batch != id || got[1].Count != 4 || got[1].Seq != 42 {
		t.Fatalf("the batch received %+v, want the refusal of message 5, then the final PubAck (count 4, seq 42)", got)
	}

	// A reply that is not JSON reaches the batch as an error; one of a
	// batch nobody waits for is dropped.
	reply(n, `not json`)
	if m := <-ch; m.err == nil {
		t.Fatal("an undecodable reply reached the batch without an error")
	}
	b.route(&nats.Msg{Subject: b.prefix + "B2.500.fail.1.2.$FI", Data: []byte(`{"stream":"EVENTS","seq":1,"batch":"B2","count":1}`)})
	if len(ch) != 0 {
		t.Fatal("a reply of another batch reached this one")
	}
}
