// Command owner runs an owner pool process pinned to one exact deployment,
// with the demo agent (runtime/demo): package owner's Main, plus the test
// aids --fault and --exec-log. With an empty --nats-url it embeds a NATS
// server with JetStream (127.0.0.1:4222, store ./data) so the nats CLI and
// cmd/ingress can connect; with --nats-only it runs that server and nothing
// else (make run starts NATS this way, in a process of its own).
package main

import (
	"flag"
	"fmt"

	"github.com/baton-rt/baton/owner"
	"github.com/baton-rt/baton/runtime/demo"
)

func main() {
	agent := &demo.Agent{}
	var effectsLog string
	owner.Main(agent, owner.WithAbout(about), owner.WithFaultFlag(),
		owner.WithExecLog(func(l owner.ExecLog, processID string) { agent.Log, agent.Process = l, processID }),
		owner.WithTask(demo.TaskFetch, agent.Fetch),
		owner.WithFlags(func(fs *flag.FlagSet) {
			fs.StringVar(&effectsLog, "effects-log", "", "TEST ONLY: append one JSON line per real execution of a demo /effects call to this file ({\"sessionId\",\"stepKey\",\"call\",\"key\"}; replayed calls are not logged)")
		}, func() error {
			if effectsLog == "" {
				return nil
			}
			l, err := demo.OpenEffectsLog(effectsLog)
			if err != nil {
				return fmt.Errorf("--effects-log: %w", err)
			}
			agent.Effects = l
			return nil
		}))
}

const about = `Runs an owner pool process of one exact deployment: it holds a lease, serves
start and wake requests on baton.deploy.<deployment>.*, runs sessions with the
demo agent and drains on SIGTERM, SIGINT or SIGHUP (a second signal aborts). With an
empty --nats-url it embeds a NATS server (JetStream, store --data-dir); with
--nats-only it runs only that server, for owners and ingresses of any
deployment to connect to.`
