package kv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// testLeaderGet: a value written through one node is read back at once
// through each other node with kv.LeaderGet and Store.LeaderHook, with no
// polling: read-after-write, which a direct get does not give on a cluster
// (a replica that has not applied the write answers "not found"). A
// deleted key is record.ErrNotFound.
func testLeaderGet(t *testing.T, nodes []*server.Server) {
	_, wjs := natstest.Connect(t, nodes[0].ClientURL())
	bucket := subjects.Default().HooksBucket()
	w, err := wjs.KeyValue(ctx(t), bucket)
	if err != nil {
		t.Fatal(err)
	}
	readers := make([]jetstream.JetStream, 0, len(nodes)-1)
	stores := make([]*kv.Store, 0, len(nodes)-1)
	for _, n := range nodes[1:] {
		_, js := natstest.Connect(t, n.ClientURL())
		readers = append(readers, js)
		stores = append(stores, open(t, n.ClientURL()))
	}
	for i := range 100 {
		key := subjects.HookKey(token(t, fmt.Sprintf("leader-get-%s-%d", uid("k"), i)))
		value := fmt.Sprintf(`{"token":"x","sessionId":"s%d"}`, i)
		rev, err := w.Create(ctx(t), key, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		js := readers[i%len(readers)]
		got, grev, err := kv.LeaderGet(ctx(t), js, bucket, key)
		if err != nil || string(got) != value || grev != rev {
			t.Fatalf("write %d: LeaderGet = %q rev %d, %v; want %q rev %d", i, got, grev, err, value, rev)
		}
		if err := w.Delete(ctx(t), key); err != nil {
			t.Fatal(err)
		}
		if _, _, err := kv.LeaderGet(ctx(t), js, bucket, key); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("deleted key %d: LeaderGet error %v, want record.ErrNotFound", i, err)
		}
	}
	// Sequential conditional updates of one key through the writer's node,
	// each read back at once through another node. On an R3 stream the
	// server can refuse a CAS whose previous write it acknowledged but has
	// not applied yet (10164, "wrong last sequence") though nothing else
	// wrote: the Store settles it (the leader still shows the key at the
	// expected revision, so the same CAS is sent again), and every update
	// must land.
	wst := open(t, nodes[0].ClientURL())
	tok := token(t, "leader-get-updated-"+uid("k"))
	rev, err := wst.CreateHook(ctx(t), record.Hook{Token: tok, SessionID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		value := fmt.Sprint(i + 1)
		if rev, err = wst.UpdateHook(ctx(t), record.Hook{Token: tok, SessionID: value}, rev); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		h, hrev, err := stores[i%len(stores)].LeaderHook(ctx(t), tok)
		if err != nil || h.SessionID != value || hrev != rev {
			t.Fatalf("update %d: LeaderHook = %+v rev %d, %v; want %q rev %d", i, h, hrev, err, value, rev)
		}
		if _, grev, err := kv.LeaderGet(ctx(t), readers[i%len(readers)], bucket, subjects.HookKey(tok)); err != nil || grev != rev {
			t.Fatalf("update %d: LeaderGet rev %d, %v; want rev %d", i, grev, err, rev)
		}
	}
	for i := range 50 {
		tok := token(t, fmt.Sprintf("leader-hook-%s-%d", uid("h"), i))
		rev, err := stores[0].CreateHook(ctx(t), record.Hook{Token: tok, SessionID: fmt.Sprintf("s%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		h, hrev, err := stores[1].LeaderHook(ctx(t), tok)
		if err != nil || h.SessionID != fmt.Sprintf("s%d", i) || hrev != rev {
			t.Fatalf("hook %d: LeaderHook = %+v rev %d, %v; want s%d rev %d", i, h, hrev, err, i, rev)
		}
	}
	if _, _, err := stores[0].LeaderHook(ctx(t), token(t, "never-"+uid("x"))); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("missing hook: %v, want record.ErrNotFound", err)
	}
}
