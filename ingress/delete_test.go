package ingress_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// deleteSession sends DELETE /v1/sessions/{id}{query} and expects 200
// with the delete's report.
func (e *env) deleteSession(id, query string) ingress.Deleted {
	e.t.Helper()
	code, b := e.call(http.MethodDelete, "/v1/sessions/"+id+query, "", testToken)
	if code != http.StatusOK {
		e.t.Fatalf("DELETE %s%s = %d %s, want 200", id, query, code, b)
	}
	var d ingress.Deleted
	if err := json.Unmarshal(b, &d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// subjectsOf lists the subjects of stream that filter matches, with their
// message counts (STREAM.INFO with a subject filter; a stream that does
// not exist holds none).
func (e *env) subjectsOf(stream, filter string) map[string]uint64 {
	e.t.Helper()
	st, err := e.JS.Stream(e.t.Context(), stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(e.t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects
}

// objects lists the names of every object in the state object store.
func (e *env) objects() map[string]bool {
	e.t.Helper()
	obs, err := e.JS.ObjectStore(e.t.Context(), e.Names.StateBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	infos, err := obs.List(e.t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return map[string]bool{}
	}
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, i := range infos {
		out[i.Name] = true
	}
	return out
}

// leftovers lists what session id still stores beside its tombstone and
// the hooks of its addresses, resource by resource, read with JetStream
// API calls on each stream, bucket and the object store.
func (e *env) leftovers(id string, aliases ...string) []string {
	e.t.Helper()
	n := e.Names
	var left []string
	add := func(what string, subs map[string]uint64) {
		for s, c := range subs {
			left = append(left, fmt.Sprintf("%s: %s (%d)", what, s, c))
		}
	}
	add("event", e.subjectsOf(n.EventsStream(), n.Events(id)))
	add("command", e.subjectsOf(n.InboxStream(), n.Inbox(id)))
	for _, a := range aliases {
		tok, err := subjects.EncodeToken(a)
		if err != nil {
			e.t.Fatal(err)
		}
		add("alias command", e.subjectsOf(n.InboxStream(), n.Inbox(tok)))
	}
	add("schedule", e.subjectsOf(n.InboxStream(), n.Sched(id)))
	add("schedule", e.subjectsOf(n.InboxStream(), n.Sched(id)+".>"))
	add("journal", e.subjectsOf("KV_"+n.JournalBucket(), subjects.KVSubject(n.JournalBucket(), id+".>")))
	add("receipt", e.subjectsOf("KV_"+n.ReceiptsBucket(), subjects.KVSubject(n.ReceiptsBucket(), id+".>")))
	for _, k := range []string{"c." + id + ".*", "p." + id + ".*", "g." + id + ".*", "r.*." + id} {
		add("inventory", e.subjectsOf("KV_"+n.BlobsBucket(), subjects.KVSubject(n.BlobsBucket(), k)))
	}
	for s, c := range e.subjectsOf("KV_"+n.IndexBucket(), subjects.KVSubject(n.IndexBucket(), ">")) {
		if strings.HasSuffix(s, "."+id) {
			left = append(left, fmt.Sprintf("index: %s (%d)", s, c))
		}
	}
	for name := range e.objects() {
		if strings.HasPrefix(name, id+"/") {
			left = append(left, "blob: "+name)
		}
	}
	names := jsListConsumers(e, n.InboxStream())
	for _, c := range names {
		if strings.HasPrefix(c, id+"-") {
			left = append(left, "consumer: "+c)
		}
	}
	recs := e.subjectsOf("KV_"+n.SessionsBucket(), subjects.KVSubject(n.SessionsBucket(), id))
	if c := recs[subjects.KVSubject(n.SessionsBucket(), id)]; c != 1 {
		left = append(left, fmt.Sprintf("record revisions: %d, want the tombstone alone", c))
	}
	return left
}

func jsListConsumers(e *env, stream string) []string {
	e.t.Helper()
	st, err := e.JS.Stream(e.t.Context(), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	l := st.ConsumerNames(e.t.Context())
	for name := range l.Name() {
		out = append(out, name)
	}
	if err := l.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// segmentsOf are the history segments a session's checkpoint refers to.
func (e *env) segmentsOf(id string) []string {
	e.t.Helper()
	cp, err := wire.DecodeCheckpoint(e.leader(id).Record.Checkpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range cp.HistorySegments {
		out = append(out, s.Digest)
	}
	return out
}

// TestDeleteRemovesEverything: a session that stored events, an alias's
// commands, out-of-line output and state, history segments (one of them
// shared with another session), a journal-free demo step's receipts and
// an index entry is deleted by DELETE /v1/sessions/{id}: 409 session_live
// while it lives, then 200 with its report, and nothing of it is left but
// its tombstone and its hooks' — while the other session that shares a
// segment still reads its history. Afterwards the ID and the alias are
// 410, the ID's code deleted.
func TestDeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", func(c *pool.Config) { c.HibernateAfter = 200 * time.Millisecond })
	big := strings.Repeat("long history ", 470) // ~6 KiB, echoed: each turn seals a segment
	var ids []string
	for _, alias := range []string{"del.one", "del.two"} {
		id := e.create(fmt.Sprintf(`{"alias":%q,"text":%q}`, alias, big)).SessionID
		e.waitEvents(id, "the first turn", func(evs []wire.Event) bool { return harness.Count(evs, "turn.completed") == 1 })
		ids = append(ids, id)
	}
	one, two := ids[0], ids[1]
	e.deliver(`{"alias":"del.one","text":"/bigstate 140000","idempotencyKey":"k-1"}`)
	e.deliver(`{"alias":"del.one","text":"/big 9000"}`)
	e.deliver(fmt.Sprintf(`{"alias":"del.one","text":%q}`, strings.Repeat("one alone ", 700)))
	e.waitEvents(one, "four turns", func(evs []wire.Event) bool { return harness.Count(evs, "turn.completed") == 4 })
	segOne, segTwo := e.segmentsOf(one), e.segmentsOf(two)
	var alone []string
	for _, s := range segOne {
		if !slices.Contains(segTwo, s) {
			alone = append(alone, s)
		}
	}
	if len(segTwo) == 0 || !slices.Contains(segOne, segTwo[0]) || len(alone) == 0 {
		t.Fatalf("the sessions do not share a segment, or the first has none of its own: %v, %v", segOne, segTwo)
	}
	var ownBlobs int
	for name := range e.objects() {
		if strings.HasPrefix(name, one+"/") {
			ownBlobs++
		}
	}
	if ownBlobs < 2 {
		t.Fatalf("session %s stored %d blobs of its own, want the state's and the output's", one, ownBlobs)
	}

	checkError(t, e, http.MethodDelete, "/v1/sessions/"+one, ``, testToken, http.StatusConflict, ingress.CodeSessionLive)
	e.endSession(one, `{"message":"bye"}`)
	e.waitState(one, record.StateEnded)
	evs := e.published(one)
	d := e.deleteSession(one, "")
	if d.SessionID != one || d.Events != uint64(len(evs)) || d.Blobs < ownBlobs+len(alone) || d.Bytes < 140000+9000 {
		t.Fatalf("report %+v, want %d events, at least %d blobs and 149 kB", d, len(evs), ownBlobs+len(alone))
	}
	if left := e.leftovers(one, "del.one"); len(left) > 0 {
		t.Fatalf("the delete left:\n%s", strings.Join(left, "\n"))
	}
	objs := e.objects()
	for _, s := range segTwo {
		if !objs[s] {
			t.Fatalf("segment %s, which session %s refers to, was deleted", s, two)
		}
	}
	for _, s := range alone {
		if objs[s] {
			t.Fatalf("segment %s of the deleted session alone stays", s)
		}
	}
	tomb := e.leader(one).Record
	if !tomb.IsDeleted() || len(tomb.Checkpoint) != 0 || tomb.Deleted.Reason != record.DeleteByUser || tomb.Deleted.Removed.Events != d.Events {
		t.Fatalf("tombstone %+v", tomb)
	}
	// The session that shares the segment still reads it: a new turn boots
	// it from its record once it hibernated.
	e.waitState(two, record.StateHibernated)
	e.deliver(`{"alias":"del.two","text":"still here"}`)
	e.waitEvents(two, "its next turn", func(evs []wire.Event) bool { return harness.Count(evs, "turn.completed") == 2 })

	checkError(t, e, http.MethodGet, "/v1/sessions/"+one, ``, testToken, http.StatusGone, ingress.CodeDeleted)
	checkError(t, e, http.MethodGet, "/v1/sessions/"+one+"/events?follow=false", ``, testToken, http.StatusGone, ingress.CodeDeleted)
	checkError(t, e, http.MethodDelete, "/v1/sessions/"+one, ``, testToken, http.StatusGone, ingress.CodeDeleted)
	checkError(t, e, http.MethodPost, "/v1/sessions/"+one+"/cancel", ``, testToken, http.StatusGone, ingress.CodeDeleted)
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"del.one","text":"again"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodDelete, "/v1/sessions/01JNOSUCHSESSION0000000000", ``, testToken, http.StatusNotFound, "not_found")
	checkError(t, e, http.MethodDelete, "/v1/sessions/"+two+"?force=maybe", ``, testToken, http.StatusBadRequest, "bad_request")
}

// childrenOf lists the children a session started (child.started).
func (e *env) childrenOf(id string, n int) []string {
	e.t.Helper()
	var kids []string
	e.waitEvents(id, fmt.Sprintf("%d children", n), func(evs []wire.Event) bool {
		kids = kids[:0]
		for _, ev := range evs {
			if ev.Kind == "child.started" {
				var c struct {
					ChildSessionID string `json:"childSessionId"`
				}
				_ = json.Unmarshal(ev.Data, &c)
				kids = append(kids, c.ChildSessionID)
			}
		}
		return len(kids) == n
	})
	return kids
}

// TestDeleteForceAndFamily: ?force=true ends a live session first (its
// input wait cancelled) and then deletes it; a child cannot be deleted
// alone while its parent lives (409 child_of_live_parent, forced too);
// the parent's delete deletes its ended children; the same over NATS.
func TestDeleteForceAndFamily(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")

	asking := e.create(`{"alias":"del.force","text":"/ask your name?"}`).SessionID
	e.waitEvents(asking, "the question", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventInputRequested) == 1 })
	d := e.deleteSession(asking, "?force=true")
	if d.Events == 0 || !e.leader(asking).Record.IsDeleted() {
		t.Fatalf("forced delete %+v, record %+v", d, e.leader(asking).Record)
	}
	if left := e.leftovers(asking, "del.force"); len(left) > 0 {
		t.Fatalf("the forced delete left:\n%s", strings.Join(left, "\n"))
	}

	parent := e.create(`{"alias":"del.parent","text":"/spawnbg kid1 hello"}`).SessionID
	e.deliver(`{"alias":"del.parent","text":"/spawnbg kid2 /ask second?"}`)
	kids := e.childrenOf(parent, 2)
	for _, q := range []string{"", "?force=true"} {
		checkError(t, e, http.MethodDelete, "/v1/sessions/"+kids[0]+q, ``, testToken, http.StatusConflict, ingress.CodeChildOfLiveParent)
	}
	e.endSession(parent, ``)
	for _, k := range kids {
		e.waitState(k, record.StateEnded)
	}
	e.waitState(parent, record.StateEnded)
	var got ingress.Deleted
	req(t, e, "delete", `{"sessionId":"`+parent+`"}`, &got)
	slices.Sort(kids)
	if got.SessionID != parent || !slices.Equal(got.ChildrenDeleted, kids) {
		t.Fatalf("NATS delete of the parent = %+v, want children %v deleted", got, kids)
	}
	for _, id := range append([]string{parent}, kids...) {
		if left := e.leftovers(id); len(left) > 0 {
			t.Fatalf("session %s kept:\n%s", id, strings.Join(left, "\n"))
		}
		checkError(t, e, http.MethodGet, "/v1/sessions/"+id, ``, testToken, http.StatusGone, ingress.CodeDeleted)
	}
	if r := e.leader(kids[0]).Record; r.Deleted.Reason != record.DeleteByParent {
		t.Fatalf("child tombstone %+v, want reason parent", r.Deleted)
	}
	microError(t, e, "delete", `{"sessionId":"`+parent+`"}`, "410", ingress.CodeDeleted)
	microError(t, e, "delete", `{"sessionId":"`+parent+`","really":true}`, "400", "bad_request")
}

// TestDeletePendingWithoutOwner: a delete no owner answers is accepted
// (202 {"pending":true}, the delete indexed) and carried out by the
// first owner's sweep once one runs.
func TestDeletePendingWithoutOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.FinishWait = 500 * time.Millisecond })
	stop := e.owner("v1", "p1")
	id := e.create(`{"alias":"del.later","text":"/done"}`).SessionID
	e.waitState(id, record.StateEnded)
	stop()
	code, b := e.call(http.MethodDelete, "/v1/sessions/"+id, "", testToken)
	if code != http.StatusAccepted || string(b) != "{\"pending\":true}\n" && string(b) != `{"pending":true}` {
		t.Fatalf("DELETE with no owner = %d %s, want 202 pending", code, b)
	}
	if e.leader(id).Record.IsDeleted() {
		t.Fatal("deleted with no owner running")
	}
	e.owner("v1", "p2", func(c *pool.Config) { c.SweepInterval = 200 * time.Millisecond })
	e.eventually(20*time.Second, "the sweep's delete", func() bool { return e.leader(id).Record.IsDeleted() })
	if left := e.leftovers(id, "del.later"); len(left) > 0 {
		t.Fatalf("the sweep's delete left:\n%s", strings.Join(left, "\n"))
	}
}

// TestDeletedAliasNew: with --ended-alias new, a delivery to a deleted
// session's alias starts a new session that takes the alias over
// (previousSessionId the deleted one, which stays 410 deleted by ID);
// with the default, it is 410 gone.
func TestDeletedAliasNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.EndedAlias = ingress.EndedAliasNew })
	e.owner("v1", "p1")
	first := e.deliver(`{"alias":"del.thread","text":"hello"}`).SessionID
	e.waitEvents(first, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, "message.output") == 1 })
	e.deleteSession(first, "?force=true")
	rc := e.deliver(`{"alias":"del.thread","text":"starting over"}`)
	if !rc.Created || rc.SessionID == first || rc.PreviousSessionID != first {
		t.Fatalf("delivery to the deleted session's alias: %+v, want a new session with previousSessionId %s", rc, first)
	}
	evs := e.waitEvents(rc.SessionID, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, "message.output") == 1 })
	if out := harness.LastData[wire.MessageOutput](t, evs, "message.output"); out.Text != "starting over" {
		t.Fatalf("the new session answered %q", out.Text)
	}
	checkError(t, e, http.MethodGet, "/v1/sessions/"+first, ``, testToken, http.StatusGone, ingress.CodeDeleted)

	gone := newEnv(t)
	gone.owner("v1", "p1")
	id := gone.deliver(`{"alias":"del.gone","text":"hello"}`).SessionID
	gone.waitEvents(id, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, "message.output") == 1 })
	gone.deleteSession(id, "?force=true")
	checkError(t, gone, http.MethodPost, "/v1/deliveries", `{"alias":"del.gone","text":"again"}`, testToken, http.StatusGone, "gone")
}

// TestDeleteChildBeforeItsFirstTurn: a child whose parent's delivery is
// still in its inbox (its checkpoint does not name the parent yet) is a
// child all the same: 409 child_of_live_parent, forced too.
func TestDeleteChildBeforeItsFirstTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.owner("v1", "p1")
	parent := e.create(`{"alias":"del.early.parent"}`).SessionID
	child := e.create(`{"alias":"del.early.child"}`).SessionID
	stop() // the child's first command stays unapplied
	cmd := harness.Deliver("from the parent")
	cmd.ID, cmd.AcceptedDeploymentID, cmd.AcceptedAt = "p1/t1/kid", "v1", time.Now()
	cmd.ParentSessionID, cmd.Handle, cmd.Depth = parent, "kid", 1
	data, err := wire.Encode(wire.Current(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.JS.Publish(t.Context(), e.Names.Inbox(subjects.StableToken(child)), data); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?force=true"} {
		checkError(t, e, http.MethodDelete, "/v1/sessions/"+child+q, ``, testToken, http.StatusConflict, ingress.CodeChildOfLiveParent)
	}
}
