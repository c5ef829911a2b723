// Command workerproc is a remote-agent worker as a process of its own,
// for the tests of test/remote that kill a worker for real (SIGKILL): it
// imports package worker, nats.go and the standard library, and no other
// Baton package (scripts/deps.sh), as a worker in any language would.
//
// Its steps, by the step's text:
//
//	retry     one journaled call "fetch", whose real executions are
//	          appended to --calls ("<name> <key>", one line each) and whose
//	          result is {"n": <lines in --calls>}; then, with
//	          --hang-after-call, the step blocks until it is cancelled or
//	          the process dies (the worker heartbeats meanwhile), else it
//	          answers "fetched <n>"
//	anything  echoed ("echo <text>")
//
// It logs JSON lines on stderr: "ready" once subscribed, "step taken" when
// a step starts, "journaled call returned" after the call (its record is
// durable then), "step served" when it replies, each with the worker's
// name and the step's token.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/baton-rt/baton/test/remote/worker"
	"github.com/nats-io/nats.go"
)

func main() {
	url := flag.String("nats", nats.DefaultURL, "the NATS server's URL")
	dep := flag.String("deployment", "v1", "the deployment whose steps this worker serves")
	name := flag.String("name", "worker", "the worker's name, in its logs and call lines")
	calls := flag.String("calls", "", "the file a real execution of the journaled call appends a line to")
	hang := flag.Bool("hang-after-call", false, "after the journaled call, block until the step ends (the process is killed)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("worker", *name)
	if err := run(log, *url, *dep, &agent{name: *name, calls: *calls, hang: *hang, log: log}); err != nil {
		log.Error("worker failed", "error", err.Error())
		os.Exit(1)
	}
}

func run(log *slog.Logger, url, dep string, a *agent) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	w := &worker.Worker{NC: nc, Deployment: dep, Handle: a.handle}
	if err := w.Start(); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	log.Info("ready", "subject", "baton.agent."+dep+".step")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	w.Close()
	return nil
}

// agent is the worker's step handler.
type agent struct {
	name, calls string
	hang        bool
	log         *slog.Logger
	mu          sync.Mutex // the calls file
}

func (a *agent) handle(s *worker.Step) worker.Reply {
	log := a.log.With("token", s.Req.Token, "session", s.Req.SessionID, "turn", s.Req.TurnID, "step", s.Req.Step)
	text := s.Text()
	log.Info("step taken", "text", text)
	var r worker.Reply
	switch text {
	case "retry":
		res, err := s.Do("fetch", a.fetch)
		if err != nil {
			log.Info("step failed", "error", err.Error())
			return worker.Reply{"error": err.Error()}
		}
		var v struct{ N int }
		_ = json.Unmarshal(res, &v)
		log.Info("journaled call returned", "result", string(res))
		if a.hang {
			<-s.Context().Done() // heartbeats go on until the process dies
			log.Info("step ended while hanging", "cancelled", s.Cancelled())
			return nil
		}
		r = worker.Output(fmt.Sprintf("fetched %d", v.N))
	default:
		r = worker.Output("echo " + text)
	}
	log.Info("step served", "text", text)
	return r
}

// fetch is the journaled call: a line in the calls file per real
// execution, and the number of lines as its result.
func (a *agent) fetch(key string) (json.RawMessage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(f, "%s %s\n", a.name, key); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	n, err := lines(a.calls)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), nil
}

// lines counts the lines of file.
func lines(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
