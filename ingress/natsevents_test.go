package ingress_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// page is an events answer with the envelopes decoded.
type page struct {
	ingress.EventPage
	evs []wire.Event
}

func eventsReq(t *testing.T, e *env, body string) page {
	t.Helper()
	var p page
	req(t, e, "events", body, &p.EventPage)
	for _, raw := range p.Events {
		var ev wire.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
		p.evs = append(p.evs, ev)
	}
	return p
}

// readAll pages through a session's events from after 0 with limit.
func readAll(t *testing.T, e *env, id string, limit int) []wire.Event {
	t.Helper()
	var all []wire.Event
	after := uint64(0)
	for {
		p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d,"limit":%d}`, id, after, limit))
		if len(p.evs) == 0 {
			if p.Next != after {
				t.Fatalf("an empty page moved next from %d to %d", after, p.Next)
			}
			return all
		}
		if len(p.evs) > limit || p.Next != p.evs[len(p.evs)-1].Seq {
			t.Fatalf("page after %d: %d events (limit %d), next %d", after, len(p.evs), limit, p.Next)
		}
		all, after = append(all, p.evs...), p.Next
	}
}

// The events operation: pages by limit with contiguous seqs, by ID or
// alias, a long poll that returns as soon as an event exists, an empty
// page at once without wait, and ended (at once, with a wait) after the
// session's last event.
func TestNATSEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	var c ingress.Created
	req(t, e, "create", `{"alias":"nats-ev","text":"one"}`, &c)
	e.deliver(`{"alias":"nats-ev","text":"two"}`)
	e.waitEvents(c.SessionID, "two outputs", func(evs []wire.Event) bool { return len(harness.Outputs(evs)) == 2 })

	all := readAll(t, e, c.SessionID, 2)
	for i, ev := range all {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the pages skip or repeat", i, ev.Seq)
		}
	}
	if got := harness.Outputs(all); strings.Join(got, ",") != "one,two" {
		t.Fatalf("outputs %q", got)
	}
	last := all[len(all)-1].Seq
	byAlias := eventsReq(t, e, `{"alias":"nats-ev","after":1,"limit":500}`)
	if byAlias.SessionID != c.SessionID || len(byAlias.evs) != len(all)-1 || byAlias.Next != last || byAlias.Ended {
		t.Fatalf("by alias: %+v", byAlias.EventPage)
	}
	var st ingress.Status
	req(t, e, "status", `{"alias":"nats-ev"}`, &st)
	if st.SessionID != c.SessionID {
		t.Fatalf("status by alias: %+v", st)
	}
	// No wait: an empty page at once.
	if p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d}`, c.SessionID, last)); len(p.evs) != 0 || p.Next != last {
		t.Fatalf("no wait: %+v", p.EventPage)
	}
	// A long poll: answered by the next event, not by the wait running out.
	got := make(chan page, 1)
	go func() {
		got <- eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d,"wait":"25s"}`, c.SessionID, last))
	}()
	time.Sleep(300 * time.Millisecond) // the poll is (very likely) waiting
	e.deliver(`{"alias":"nats-ev","text":"three"}`)
	select {
	case p := <-got:
		if len(p.evs) == 0 || p.evs[0].Seq != last+1 {
			t.Fatalf("long poll: %+v", p.EventPage)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll was not answered by the new event")
	}
	e.waitEvents(c.SessionID, "three", func(evs []wire.Event) bool { return len(harness.Outputs(evs)) == 3 })

	// End it: the last page says ended, and a wait past the end is
	// answered at once (req's timeout is 10 s, the wait 30 s).
	var rc ingress.Receipt
	req(t, e, "end", `{"sessionId":"`+c.SessionID+`"}`, &rc)
	var final []wire.Event
	e.eventually(20*time.Second, "the session ended", func() bool {
		final = readAll(t, e, c.SessionID, 500)
		return len(final) > 0 && final[len(final)-1].Kind == wire.EventSessionEnded
	})
	end := final[len(final)-1].Seq
	p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d,"wait":"30s"}`, c.SessionID, end))
	if !p.Ended || len(p.evs) != 0 || p.Next != end {
		t.Fatalf("after the end: %+v", p.EventPage)
	}
	if p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d}`, c.SessionID, end-1)); !p.Ended || len(p.evs) != 1 {
		t.Fatalf("the last page: %+v", p.EventPage)
	}
	if p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"after":%d,"limit":1}`, c.SessionID, end-2)); p.Ended || p.Next != end-1 {
		t.Fatalf("a page before the last: %+v", p.EventPage)
	}
	// An ended session's events stay readable by its alias.
	if p := eventsReq(t, e, `{"alias":"nats-ev","limit":500}`); p.SessionID != c.SessionID || !p.Ended || p.Next != end {
		t.Fatalf("ended, by alias: %+v", p.EventPage)
	}

	for body, code := range map[string]string{
		`{"sessionId":"` + c.SessionID + `","limit":0}`:    "bad_request",
		`{"sessionId":"` + c.SessionID + `","limit":501}`:  "bad_request",
		`{"sessionId":"` + c.SessionID + `","wait":"31s"}`: "bad_request",
		`{"sessionId":"` + c.SessionID + `","wait":"-1s"}`: "bad_request",
		`{"sessionId":"` + c.SessionID + `","wait":5}`:     "bad_request",
		`{"sessionId":"` + c.SessionID + `","after":-1}`:   "bad_request",
		`{"sessionId":"` + c.SessionID + `","alias":"x"}`:  "bad_request",
		`{"sessionId":"` + c.SessionID + `","from":1}`:     "bad_request",
		`{}`: "bad_request",
	} {
		microError(t, e, "events", body, "400", code)
	}
	microError(t, e, "events", `{"sessionId":"01JZZZZZZZZZZZZZZZZZZZZZZZ"}`, "404", "not_found")
	microError(t, e, "events", `{"alias":"nobody-has-it"}`, "404", "not_found")
	microError(t, e, "status", `{"sessionId":"`+c.SessionID+`","alias":"nats-ev"}`, "400", "bad_request")
	microError(t, e, "status", `{"alias":"nobody-has-it"}`, "404", "not_found")
}

// Large output over NATS: content above NATSInlineOutput comes as its ref
// and is read through blob in chunks that fit a reply, verified against
// the digest; content below it is inlined; a page stays within the byte
// bound, and the pages together hold every event.
func TestNATSEventsLargeOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	var c ingress.Created
	req(t, e, "create", `{"alias":"nats-big","text":"/big 1200000"}`, &c)
	e.deliver(`{"alias":"nats-big","text":"/big 100000"}`) // over NATSInlineOutput, under the bound
	for range 14 {
		e.deliver(`{"alias":"nats-big","text":"/big 50000"}`)
	}
	var all []wire.Event // read over NATS: HTTP would inline the 1.2 MB output
	e.eventually(60*time.Second, "16 big outputs", func() bool {
		all = readAll(t, e, c.SessionID, 500)
		return countKind(all, wire.EventMessageOutput) >= 32
	})
	p := eventsReq(t, e, fmt.Sprintf(`{"sessionId":%q,"limit":500}`, c.SessionID))
	if len(p.evs) == 0 || len(p.evs) >= len(all) {
		t.Fatalf("the first page holds %d of %d events: not cut by the byte bound", len(p.evs), len(all))
	}
	var size int
	for _, raw := range p.Events {
		size += len(raw)
	}
	if size > ingress.MaxEventsReplyBytes {
		t.Fatalf("a page of %d bytes of events", size)
	}
	var refs, inlined int
	for _, ev := range all {
		if ev.Kind != wire.EventMessageOutput {
			continue
		}
		var d struct {
			Text *string       `json:"text"`
			Ref  *wire.BlobRef `json:"ref"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Ref != nil && (d.Ref.Size == 1200000 || d.Ref.Size == 100000):
			refs++
			content := readBlob(t, e, c.SessionID, *d.Ref, int(d.Ref.Size/1000000+1))
			if err := d.Ref.Verify(content); err != nil {
				t.Fatalf("blob: %v", err)
			}
		case d.Text != nil && len(*d.Text) == 50000:
			inlined++
		}
	}
	if refs != 2 || inlined != 14 {
		t.Fatalf("%d outputs by ref (want 2), %d inlined (want 14)", refs, inlined)
	}
	microError(t, e, "blob", `{"sessionId":"`+c.SessionID+`","digest":"sha256:`+strings.Repeat("0", 64)+`"}`, "404", ingress.CodeBlobNotFound)
	microError(t, e, "blob", `{"sessionId":"`+c.SessionID+`","digest":"sha256:xyz"}`, "400", "bad_request")
	microError(t, e, "blob", `{"sessionId":"`+c.SessionID+`"}`, "400", "bad_request")
}

// readBlob reads a blob through the blob operation, chunk by chunk: at
// least minChunks of them.
func readBlob(t *testing.T, e *env, id string, ref wire.BlobRef, minChunks int) []byte {
	t.Helper()
	var content []byte
	chunks := 0
	for {
		var ch ingress.BlobChunk
		req(t, e, "blob", fmt.Sprintf(`{"sessionId":%q,"digest":%q,"offset":%d}`, id, ref.Digest, len(content)), &ch)
		if ch.Offset != int64(len(content)) || ch.Size != ref.Size {
			t.Fatalf("chunk at %d: offset %d size %d", len(content), ch.Offset, ch.Size)
		}
		content, chunks = append(content, ch.Data...), chunks+1
		if ch.EOF {
			break
		}
		if len(ch.Data) == 0 || chunks > 100 {
			t.Fatalf("chunk %d at %d: no progress", chunks, len(content))
		}
	}
	if chunks < minChunks {
		t.Fatalf("%d bytes in %d chunk: the reply bound did not cut it", len(content), chunks)
	}
	past := fmt.Sprintf(`{"sessionId":%q,"digest":%q,"offset":%d}`, id, ref.Digest, ref.Size+1)
	microError(t, e, "blob", past, "400", "bad_request")
	return content
}

func countKind(evs []wire.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}
