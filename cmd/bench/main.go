// Command bench prints Baton's benchmark figures as BENCH lines (see
// internal/bench), each later figure compared with a raw JetStream baseline
// measured in the same run against the same embedded server over TCP
// loopback with file storage. A figure of concurrent sessions is compared
// with as many concurrent raw loops (js_publish_consume_rtt_100).
//
// Profiles, per suite (the embedded server runs in the process, so they
// hold its share too): -cpuprofile P writes P.<suite> for each suite;
// -mutexprofile P and -blockprofile P write P.<suite> after each suite
// but the js baselines, counting contention from the first such suite
// on (Go's contention profiles cannot be reset: run one suite with -only
// for a profile of it alone); -memprofile P writes P.<suite>, the
// allocations since the process started, after each suite (go tool pprof
// -sample_index=alloc_space). Read them with go tool pprof. -figureprofile P
// writes a CPU profile of each delivery_to_step_start figure alone to
// P.<figure>; go run ./internal/tools/cpushare P.<figure> prints its share
// by owner (server, client, each Baton package, GC).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// env is what every suite gets: a fresh embedded server and a TCP client.
type env struct {
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	scale float64
}

// n scales a default iteration count by -scale.
func (e *env) n(def int) int {
	v := int(float64(def) * e.scale)
	return max(v, 1)
}

type suite struct {
	name string
	run  func(ctx context.Context, e *env, r *bench.Reporter) error
}

func suites() []suite {
	return []suite{
		{"js", benchJS},
		{"wire", func(ctx context.Context, _ *env, r *bench.Reporter) error { return benchWire(ctx, r) }},
		{"runtime", benchRuntime},
		{"remote", benchRemote},
		{"child", benchChild},
		{"http", benchHTTP},
		{"handoff", benchHandoff},
		{"hibernate", benchHibernate},
		{"failover", benchFailover},
		{"pool", benchPool},
		{"index", benchIndex},
		{"delete", benchDelete},
	}
}

func main() {
	only := flag.String("only", "", "comma-separated suites to run (default: all); js always runs first")
	scale := flag.Float64("scale", 1, "multiplies every iteration count")
	var p profiles
	flag.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of each suite to this path plus .<suite>")
	flag.StringVar(&p.mutex, "mutexprofile", "", "write the mutex contention profile after each suite but js to this path plus .<suite>")
	flag.StringVar(&p.block, "blockprofile", "", "write the blocking profile after each suite but js to this path plus .<suite>")
	flag.StringVar(&p.mem, "memprofile", "", "write the allocation profile (counted from the start) after each suite to this path plus .<suite>")
	flag.IntVar(&deleteTurns, "delete-turns", deleteTurns, "turns of each session the delete suite deletes")
	flag.StringVar(&figureCPU, "figureprofile", "", "write a CPU profile of each delivery_to_step_start figure alone to this path plus .<figure> (not with -cpuprofile)")
	flag.Parse()
	if p.cpu != "" && figureCPU != "" {
		fmt.Fprintln(os.Stderr, "bench: -cpuprofile and -figureprofile exclude each other (one CPU profile at a time)")
		os.Exit(2)
	}
	if err := run(*only, *scale, p); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(only string, scale float64, p profiles) error {
	dir, err := os.MkdirTemp("", "baton-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := natsd.Start(natsd.Config{Dir: dir, Port: -1, Name: "bench"})
	if err != nil {
		return err
	}
	defer natsd.Shutdown(s)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	e := &env{url: s.ClientURL(), nc: nc, js: js, scale: scale}
	r := bench.NewReporter(os.Stdout)
	ctx := context.Background()
	for _, su := range suites() {
		if su.name != "js" && only != "" && !strings.Contains(","+only+",", ","+su.name+",") {
			continue
		}
		start := time.Now()
		stop, err := p.start(su.name)
		if err != nil {
			return err
		}
		err = su.run(ctx, e, r)
		if perr := stop(); err == nil {
			err = perr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", su.name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: suite %s took %s\n", su.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
