// Package owner runs your agent on Baton: it is the owner process — the
// program that holds a lease in NATS, serves its deployment's start and
// wake requests and runs the sessions, one [runtime.Agent] step at a time,
// with every step's result committed to JetStream before it is published.
// bin/owner is this package with the demo agent; your own owner binary is
// this package with your agent.
//
// # A minimal owner binary
//
// An agent implements [runtime.Agent]: the event kinds it emits besides
// message.output, and Step, which turns one step's input into its result.
// Main gives the binary every flag of bin/owner:
//
//	package main
//
//	import (
//		"context"
//
//		"github.com/baton-rt/baton/owner"
//		"github.com/baton-rt/baton/runtime"
//	)
//
//	type echo struct{}
//
//	func (echo) EventKinds() []string { return nil }
//
//	func (echo) Step(_ context.Context, in runtime.StepInput) (runtime.StepResult, error) {
//		r := runtime.StepResult{Outcome: runtime.OutcomeDone}
//		for _, c := range in.Inputs {
//			if c.Kind == runtime.KindDeliver {
//				r.Events = append(r.Events, runtime.Output("echo: "+c.Text))
//			}
//		}
//		return r, nil
//	}
//
//	func main() { owner.Main(echo{}) }
//
// Built and started as
//
//	go build -o myowner . && ./myowner --deployment-id v1
//
// it embeds a NATS server with JetStream (127.0.0.1:4222, store ./data),
// creates the topology (every stream and bucket) and serves deployment v1
// until SIGTERM, SIGINT or SIGHUP, then drains: no new work, running steps finish
// and commit, every session hibernates, the lease is released. An ingress
// of the same deployment (bin/ingress --deployment-id v1) takes deliveries
// over HTTP; docs/agent.md ("Write your own agent") walks through it, and
// through shipping a new version of the agent as a new deployment.
//
// # Configuration
//
// Main's flags (--help lists them) set a [Config]; a program with its own
// configuration calls [Run] with one instead, starting from
// [DefaultConfig]:
//
//	cfg := owner.DefaultConfig()
//	cfg.DeploymentID = "v1"
//	cfg.NATSURL = "nats://nats-1:4222,nats://nats-2:4222"
//	cfg.Replicas = 3
//	cfg.Logger = slog.Default()
//	err := owner.Run(ctx, cfg, agent) // until ctx ends, then drains
//
// The settings, each named after its flag:
//
//   - the deployment and NATS: DeploymentID (required), NATSURL (empty:
//     the embedded server on NATSListen with its store in DataDir,
//     SyncAlways; NATSOnly runs that server alone), Prefix, Replicas,
//     ProcessID, LockFile;
//   - durability: LeaseTTL, SweepInterval, TaskAckWait, StepTimeout
//     (docs/runtime.md, "Durability"), ChildSendTimeout (docs/driver.md,
//     "Child sends");
//   - hibernation and drain: HibernateAfter, MaxLoaded,
//     InboxSweepInterval, DrainTimeout (docs/driver.md);
//   - quarantine: QuarantineAfter, QuarantineBackoff;
//   - limits: MaxStepsPerTurn (default 50), MaxTokensPerTurn and
//     MaxTokensPerSession (0: none);
//   - observability: MetricsListen (Prometheus /metrics, /healthz,
//     /readyz), Logger (Main builds it from --log-level and --log-format),
//     and Ready, called once the deployment serves.
//
// [Config.Validate] checks every value before anything starts, naming the
// flag of a bad one; Run returns the same error ([ErrInvalidConfig]) and
// Main exits with a usage error (code 2).
//
// # Options
//
// Main's [Option] values name the binary ([WithName]), replace its help
// text ([WithAbout]), add flags of the binary's own beside owner's
// ([WithFlags]: registered before parsing, listed by --help, checked after
// it; a clash with an owner flag is a usage error), run functions once
// the owner has stopped ([WithCleanup]: to close what a check started)
// and add the test aids a test binary opts into: the crash points of
// --fault ([WithFaultFlag]) and the execution log of --exec-log
// ([WithExecLog]). bin/owner (cmd/owner) offers both.
//
// # Agents in other languages
//
// [RemoteAgent] (and --agent nats for any owner binary) runs no agent
// code: each step goes over NATS to the workers of the deployment, in any
// language, which answer with the documented JSON (docs/agent.md,
// "Writing an agent in another language"). The owner keeps everything
// durable: history, journaled calls, cancellation, deltas to SSE.
//
// Everything a user's binary names is in a public package: owner,
// runtime (the Agent interface and its types) and, for an ingress of its
// own, ingress. owner itself uses Baton's internal packages (the embedded
// server, the topology), which another module cannot import.
package owner
