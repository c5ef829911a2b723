package conformance

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/oklog/ulid/v2"
)

// InboxTarget is an inbox under test: the session.Inbox and its backlog
// reads, and a way to publish a message on a token as the ingress does.
type InboxTarget struct {
	Inbox   session.Inbox
	Backlog session.Backlog
	Publish func(t *testing.T, token string, data []byte) uint64
}

// Inbox runs the inbox suite.
func Inbox(t *testing.T, open func(t *testing.T) InboxTarget) {
	t.Run("delivers in stream order from the start", func(t *testing.T) { inboxOrder(t, open(t)) })
	t.Run("re-open at a sequence", func(t *testing.T) { inboxReopen(t, open(t)) })
	t.Run("delete signals loss", func(t *testing.T) { inboxLoss(t, open(t)) })
	t.Run("purge and backlog", func(t *testing.T) { inboxPurge(t, open(t)) })
	t.Run("forget applied", func(t *testing.T) { inboxForget(t, open(t)) })
	t.Run("read one message", func(t *testing.T) { inboxRead(t, open(t)) })
}

func tokens(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = subjects.StableToken(ulid.Make().String())
	}
	return out
}

func next(t *testing.T, r session.Reader) session.Delivery {
	t.Helper()
	select {
	case d := <-r.Deliveries():
		return d
	case err := <-r.Lost():
		t.Fatalf("reader lost: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery")
	}
	return session.Delivery{}
}

func none(t *testing.T, r session.Reader) {
	t.Helper()
	select {
	case d := <-r.Deliveries():
		t.Fatalf("unexpected delivery %d %q", d.Seq, d.Data)
	case <-time.After(200 * time.Millisecond):
	}
}

func inboxOrder(t *testing.T, in InboxTarget) {
	ctx, toks := ctxOf(t), tokens(3)
	a := in.Publish(t, toks[0], []byte("a"))
	in.Publish(t, toks[2], []byte("other session"))
	b := in.Publish(t, toks[1], []byte("b"))
	r, err := in.Inbox.Open(ctx, session.Cursor{Name: "c-" + toks[0], Tokens: toks[:2], Start: 1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if d := next(t, r); d.Seq != a || string(d.Data) != "a" || d.Stored.IsZero() {
		t.Fatalf("first %+v", d)
	}
	if d := next(t, r); d.Seq != b || string(d.Data) != "b" {
		t.Fatalf("second %+v", d)
	}
	c := in.Publish(t, toks[0], []byte("c"))
	if d := next(t, r); d.Seq != c {
		t.Fatalf("a message published while reading: %+v", d)
	}
	none(t, r)
	ok, err := in.Inbox.Exists(ctx, "c-"+toks[0])
	if err != nil || !ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
}

func inboxReopen(t *testing.T, in InboxTarget) {
	ctx, toks := ctxOf(t), tokens(1)
	var seqs []uint64
	for _, s := range []string{"1", "2", "3"} {
		seqs = append(seqs, in.Publish(t, toks[0], []byte(s)))
	}
	name := "c-" + toks[0]
	r, err := in.Inbox.Open(ctx, session.Cursor{Name: name, Tokens: toks, Start: 1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	next(t, r)
	next(t, r)
	r.Close()
	r, err = in.Inbox.Open(ctx, session.Cursor{Name: name, Tokens: toks, Start: seqs[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if d := next(t, r); d.Seq != seqs[1] {
		t.Fatalf("re-opened at %d: first %d", seqs[1], d.Seq)
	}
	if d := next(t, r); d.Seq != seqs[2] {
		t.Fatalf("then %d", d.Seq)
	}
}

func inboxLoss(t *testing.T, in InboxTarget) {
	ctx, toks := ctxOf(t), tokens(1)
	name := "c-" + toks[0]
	r, err := in.Inbox.Open(ctx, session.Cursor{Name: name, Tokens: toks, Start: 1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := in.Inbox.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.Lost():
		if err == nil {
			t.Fatal("a nil loss")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("deleting the cursor did not end its reader")
	}
	if ok, err := in.Inbox.Exists(ctx, name); err != nil || ok {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if err := in.Inbox.Delete(ctx, name); err != nil {
		t.Fatalf("deleting a missing cursor: %v", err)
	}
}

func inboxPurge(t *testing.T, in InboxTarget) {
	ctx, toks := ctxOf(t), tokens(2)
	a := in.Publish(t, toks[0], []byte("a"))
	b := in.Publish(t, toks[1], []byte("b"))
	c := in.Publish(t, toks[0], []byte("c"))
	if seq, err := in.Backlog.After(ctx, toks, a-1); err != nil || seq != a {
		t.Fatalf("after %d: %d %v", a-1, seq, err)
	}
	if seq, err := in.Backlog.After(ctx, toks[:1], a); err != nil || seq != c {
		t.Fatalf("after %d on one token: %d %v", a, seq, err)
	}
	if err := in.Inbox.Purge(ctx, toks, c); err != nil {
		t.Fatal(err)
	}
	if seq, err := in.Backlog.After(ctx, toks, 0); err != nil || seq != c {
		t.Fatalf("after the purge below %d: %d %v (b was %d)", c, seq, err, b)
	}
	if seq, err := in.Backlog.After(ctx, toks, c); err != nil || seq != 0 {
		t.Fatalf("after the last: %d %v", seq, err)
	}
	r, err := in.Inbox.Open(ctx, session.Cursor{Name: "c-" + toks[0], Tokens: toks, Start: 1, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if d := next(t, r); d.Seq != c {
		t.Fatalf("a purged message delivered: %d", d.Seq)
	}
}

// inboxForget: Forget deletes the messages at the given sequences, above a
// message it keeps; a cursor re-opened below them delivers the rest only,
// and forgetting them again (or a sequence never used) is not an error.
func inboxForget(t *testing.T, in InboxTarget) {
	ctx, toks := ctxOf(t), tokens(1)
	a := in.Publish(t, toks[0], []byte("a"))
	b := in.Publish(t, toks[0], []byte("b"))
	c := in.Publish(t, toks[0], []byte("c"))
	d := in.Publish(t, toks[0], []byte("d"))
	for range 2 {
		if err := in.Inbox.Forget(ctx, []uint64{b, c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Inbox.Forget(ctx, []uint64{d + 1000}); err != nil {
		t.Fatalf("forget a sequence never used: %v", err)
	}
	if seq, err := in.Backlog.After(ctx, toks, a); err != nil || seq != d {
		t.Fatalf("after %d: %d %v, want %d", a, seq, err, d)
	}
	r, err := in.Inbox.Open(ctx, session.Cursor{Name: "f-" + toks[0], Tokens: toks, Start: a, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, want := range []uint64{a, d} {
		if got := next(t, r); got.Seq != want {
			t.Fatalf("delivered %d, want %d", got.Seq, want)
		}
	}
}

// inboxRead: an inbox that reads one message by its sequence
// (session.MessageReader) returns the message on one of the tokens named,
// and refuses one on another token and a sequence with no message.
func inboxRead(t *testing.T, in InboxTarget) {
	rd, ok := in.Inbox.(session.MessageReader)
	if !ok {
		t.Fatalf("%T reads no message by its sequence", in.Inbox)
	}
	ctx, toks := ctxOf(t), tokens(2)
	a := in.Publish(t, toks[0], []byte("a"))
	b := in.Publish(t, toks[1], []byte("b"))
	for _, tt := range []struct {
		seq  uint64
		data string
	}{{a, "a"}, {b, "b"}} {
		d, err := rd.Read(ctx, toks, tt.seq)
		if err != nil || d.Seq != tt.seq || string(d.Data) != tt.data || d.Stored.IsZero() {
			t.Fatalf("read %d: %+v %v", tt.seq, d, err)
		}
	}
	if d, err := rd.Read(ctx, toks[:1], b); err == nil {
		t.Fatalf("read %d of another token: %+v", b, d)
	}
	if d, err := rd.Read(ctx, toks, b+1000); err == nil {
		t.Fatalf("read %d, never used: %+v", b+1000, d)
	}
}
