// Command bench prints Baton's benchmark figures as BENCH lines (see
// internal/bench), each later figure compared with a raw JetStream baseline
// measured in the same run against the same embedded server over TCP
// loopback with file storage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
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
	}
}

func main() {
	only := flag.String("only", "", "comma-separated suites to run (default: all); js always runs first")
	scale := flag.Float64("scale", 1, "multiplies every iteration count")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := run(*only, *scale); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(only string, scale float64) error {
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
		if err := su.run(ctx, e, r); err != nil {
			return fmt.Errorf("%s: %w", su.name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: suite %s took %s\n", su.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
