package inproc

import (
	"context"
	"github.com/baton-rt/baton/internal/execlog"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
)

// Owner is an in-process owner: the driver's Owner and the Runner of its
// Run (Stop, Cancel, Done, Err).
type Owner struct {
	*pool.Owner
	*harness.Runner
}

// Config is the pool.Config of process of deployment on e's connection
// and store with the harness's defaults: the demo agent with an execution
// log of its own, 50 ms ticks, no logger (set Log).
func Config(e *harness.Env, deployment, process string) pool.Config {
	return pool.Config{
		NC: e.NC, JS: e.JS, Store: e.Store, Names: e.Names, Deployment: deployment, ProcessID: process,
		Agent: &demo.Agent{Log: &execlog.MemLog{}, Process: process}, TickInterval: 50 * time.Millisecond,
	}
}

// Start builds the owner of cfg and runs it.
func Start(cfg pool.Config) (*Owner, error) {
	o, err := pool.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Owner{Owner: o, Runner: harness.Go(o.Run)}, nil
}

// Run starts an owner of deployment with process ID process on a
// connection and store of its own to e's server: Config, logging into the
// test's log at level warn, then mutate. It waits until the deployment's
// start responder answers, and stops when the test ends.
func Run(tb harness.TB, e *harness.Env, deployment, process string, mutate ...func(*pool.Config)) *Owner {
	tb.Helper()
	t := harness.For(tb)
	cfg := Config(t.Peer(e), deployment, process)
	cfg.Log = t.Logger(slog.LevelWarn)
	for _, m := range mutate {
		m(&cfg)
	}
	o, err := Start(cfg)
	t.Check(err)
	tb.Cleanup(func() { _ = o.Stop() })
	t.Check(e.WaitServing(context.Background(), deployment, 10*time.Second))
	return o
}
