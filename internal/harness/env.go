package harness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultDeployment is the deployment an Env stamps commands with and sends
// start requests to unless told otherwise.
const DefaultDeployment = "v1"

// Env is a client of one Baton topology: a connection that reconnects
// forever, its JetStream context, the kv store and the names, and the
// deployment commands are accepted for when they name none.
type Env struct {
	URL        string
	NC         *nats.Conn
	JS         jetstream.JetStream
	Store      *kv.Store // nil until Ensure or OpenStore
	Names      subjects.Names
	Deployment string // default DefaultDeployment

	ids atomic.Uint64 // command IDs c1, c2, … for commands sent without one

	eventsMu sync.Mutex
	events   map[string]*eventsRead // Events' last read of each session
}

// Dial connects to url; the store is not opened (the topology may not
// exist yet: OpenStore once it does, or Ensure it).
func Dial(url string) (*Env, error) {
	nc, js, err := Connect(url)
	if err != nil {
		return nil, err
	}
	return &Env{URL: url, NC: nc, JS: js, Names: subjects.Default(), Deployment: DefaultDeployment}, nil
}

// Ensure creates the topology (every stream and bucket, cfg's replicas;
// idempotent; retried while a cluster still forms, as an owner does) and
// opens the store.
func (e *Env) Ensure(ctx context.Context, cfg topology.Config) error {
	if _, err := topology.Await(ctx, e.JS, cfg, time.Minute, nil); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return e.OpenStore(ctx)
}

// OpenStore opens the kv store of a topology that exists.
func (e *Env) OpenStore(ctx context.Context) error {
	store, err := kv.Open(ctx, e.JS, e.Names)
	if err != nil {
		return fmt.Errorf("kv: %w", err)
	}
	e.Store = store
	return nil
}

// Close closes the connection.
func (e *Env) Close() { e.NC.Close() }
