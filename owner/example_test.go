package owner_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/owner"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// echo is the agent of the examples: every delivery is answered with
// "echo: <its text>", and the turn is done.
type echo struct{}

func (echo) EventKinds() []string { return nil }

func (echo) Step(_ context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	for _, c := range in.Inputs {
		if c.Kind == runtime.KindDeliver {
			r.Events = append(r.Events, runtime.Output("echo: "+c.Text))
		}
	}
	return r, nil
}

// The whole main package of an owner binary: every flag of bin/owner, with
// this agent.
func ExampleMain() {
	owner.Main(echo{})
}

// A test binary offers the test aids: cmd/owner runs the demo agent this
// way, its execution log attached by --exec-log.
func ExampleMain_testAids() {
	agent := &demo.Agent{}
	owner.Main(agent, owner.WithFaultFlag(),
		owner.WithExecLog(func(l owner.ExecLog, processID string) { agent.Log, agent.Process = l, processID }))
}

// An owner binary whose steps run on remote workers (any language, over
// NATS: docs/agent.md, "Writing an agent in another language"); Main's
// --agent nats does the same for any owner binary.
func ExampleRemoteAgent() {
	owner.Main(owner.RemoteAgent(owner.RemoteConfig{
		EventKinds:       []string{"tool.used"},
		UnavailableAfter: time.Minute, // workers restart slowly
	}))
}

// withFlagsMain is the main function of a binary with a flag of its own,
// --model: WithFlags registers it beside every owner flag, and its check
// refuses an empty value before anything runs. The agent reads the value
// once Main has parsed it.
func withFlagsMain() {
	var model string
	owner.Main(echo{}, owner.WithName("myowner"), owner.WithFlags(
		func(fs *flag.FlagSet) {
			fs.StringVar(&model, "model", "gpt-4o-mini", "the model the agent calls")
		},
		func() error {
			if model == "" {
				return errors.New("--model: want a model name")
			}
			return nil
		}))
}

// A binary's own flags: --help lists --model with owner's flags, and the
// check's error is a usage error (exit 2). withFlagsMain above is the
// binary's main; the example runs it as a process of its own.
func ExampleWithFlags() {
	help, code := runMain("withflags", "--help")
	fmt.Println(code, strings.Contains(help, "the model the agent calls (default \"gpt-4o-mini\")"))
	out, code := runMain("withflags", "--deployment-id", "v1", "--model", "")
	fmt.Print(out)
	fmt.Println("exit", code)
	// Output:
	// 0 true
	// myowner: usage: --model: want a model name
	// Run 'myowner --help' for the flags.
	// exit 2
}

// Run an owner on an embedded NATS server, deliver a message through an
// in-process ingress of the same deployment, read the agent's answer from
// the session's event stream, and stop (the owner drains).
func ExampleRun() {
	dir, err := os.MkdirTemp("", "owner-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := owner.DefaultConfig()
	cfg.DeploymentID = "v1"
	cfg.DataDir = dir               // the embedded server's store
	cfg.NATSListen = "127.0.0.1:-1" // on a free port
	ready := make(chan string, 1)
	cfg.Ready = func(url string) { ready <- url }

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- owner.Run(ctx, cfg, echo{}) }()
	select {
	case url := <-ready:
		answer, err := deliver(url, "v1", "hello")
		fmt.Println(answer, err)
	case err := <-done:
		log.Fatal(err)
	}
	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// echo: hello <nil>
	// stopped: <nil>
}

// deliver sends text to the alias "example" through an ingress of
// deployment and returns the session's first output.
func deliver(url, deployment, text string) (string, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	in, err := ingress.New(ingress.Config{NC: nc, JS: js, Deployment: deployment, InsecureDev: true})
	if err != nil {
		return "", err
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt, err := in.Deliver(ctx, ingress.Request{Alias: "example", Kind: wire.KindDeliver, Mode: wire.ModeQueue,
		Payloads: []wire.Payload{{Message: &wire.Message{Text: text}}}})
	if err != nil {
		return "", err
	}
	return firstOutput(ctx, js, receipt.SessionID)
}

// firstOutput reads the session's events until its first message.output.
func firstOutput(ctx context.Context, js jetstream.JetStream, sessionID string) (string, error) {
	names := subjects.Default()
	events, err := js.OrderedConsumer(ctx, names.EventsStream(),
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.Events(sessionID)}})
	if err != nil {
		return "", err
	}
	for ctx.Err() == nil {
		msg, err := events.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return "", err
		}
		ev, err := wire.DecodeEvent(nil, msg.Data())
		if err != nil || ev.Kind != wire.EventMessageOutput {
			continue
		}
		out, err := wire.DecodeData[wire.MessageOutput](ev)
		return out.Text, err
	}
	return "", errors.Join(errors.New("no output"), ctx.Err())
}
