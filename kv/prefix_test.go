package kv_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leader reads under an API prefix or a domain: requests sent under the
// default $JS.API prefix would reach no JetStream (the account import) or
// the wrong one (the leaf node's), so each test also shows that a Stream
// built on a plain jetstream.New does not find the message.

// accountsConf: account JS has JetStream and exports its API; account APP
// has none and imports it under JS.hub.API.
const accountsConf = `
jetstream: {store_dir: %q}
accounts: {
  JS: {
    jetstream: enabled
    users: [{user: js, password: js}]
    exports: [{service: "$JS.API.>"}]
  }
  APP: {
    users: [{user: app, password: app}]
    imports: [{service: {account: JS, subject: "$JS.API.>"}, to: "JS.hub.API.>"}]
  }
}
`

// TestAPIPrefix: a Store and a Stream built on jetstream.NewWithAPIPrefix
// in an account that reaches JetStream only through an import.
func TestAPIPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, accountsConf, filepath.Join(dir, "js")), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s := startServer(t, opts)

	home := connect(t, s.ClientURL(), nats.UserInfo("js", "js"))
	ensureJS(t, home, 1)
	createStream(t, home, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})

	nc := connectNC(t, s.ClientURL(), nats.UserInfo("app", "app"))
	js, err := jetstream.NewWithAPIPrefix(nc, "JS.hub.API")
	if err != nil {
		t.Fatal(err)
	}
	checkStreamReads(t, home, kv.NewStream(js, "S"))
	checkStoreReads(t, home, js)
	checkDefaultPrefixMisses(t, nc, "S")
}

// TestDomain: a client of a leaf node (domain leaf) reads the hub's
// stream (domain hub) through jetstream.NewWithDomain.
func TestDomain(t *testing.T) {
	t.Parallel()
	hubOpts := &server.Options{ServerName: "hub", Host: "127.0.0.1", Port: -1, JetStream: true,
		JetStreamDomain: "hub", StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: -1}}
	hub := startServer(t, hubOpts)
	remote, err := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", hubOpts.LeafNode.Port))
	if err != nil {
		t.Fatal(err)
	}
	leaf := startServer(t, &server.Options{ServerName: "leaf", Host: "127.0.0.1", Port: -1, JetStream: true,
		JetStreamDomain: "leaf", StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}}})

	nc := connectNC(t, leaf.ClientURL())
	js, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error { // the leaf connection is up
		_, err := js.AccountInfo(ctx(t))
		return err
	})
	createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	checkStreamReads(t, js, kv.NewStream(js, "S"))
	home := connect(t, hub.ClientURL())
	ensureJS(t, home, 1)
	checkStoreReads(t, home, js)
	checkDefaultPrefixMisses(t, nc, "S")
}

// checkStoreReads writes a session record through home and reads it with
// the KV leader reads of a Store opened on js.
func checkStoreReads(t *testing.T, home, js jetstream.JetStream) {
	t.Helper()
	writer, err := kv.Open(ctx(t), home, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Open(ctx(t), js, subjects.Default())
	if err != nil {
		t.Fatalf("open through the prefix: %v", err)
	}
	id := uid("s")
	rev, err := writer.CreateSession(ctx(t), sessionRec(id, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.LeaderSession(ctx(t), id)
	if err != nil || got.Revision != rev || got.Record.OwnerRunID != "r1" {
		t.Fatalf("leader session: %+v %v", got, err)
	}
	if _, err := st.SessionAt(ctx(t), id, rev); err != nil {
		t.Fatalf("session at: %v", err)
	}
}

// checkDefaultPrefixMisses: the same read under $JS.API fails on nc.
func checkDefaultPrefixMisses(t *testing.T, nc *nats.Conn, stream string) {
	t.Helper()
	plain, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	m, err := kv.NewStream(plain, stream).Get(c, 1)
	if err == nil || errors.Is(err, record.ErrNotFound) {
		t.Fatalf("under the default prefix: %+v %v", m, err)
	}
	t.Logf("under the default prefix: %v", err)
}

func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { natsd.Shutdown(s) })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return s
}

func connectNC(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func connect(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(connectNC(t, url, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return js
}
