// Package remote is the agent of a deployment whose owners run no agent
// code: its Agent is a runtime.Agent that sends each step over core NATS
// to a worker of the deployment — a process in any language subscribed to
// baton.agent.<deployment>.step in a queue group — and returns the
// worker's reply as the step's result. Everything durable stays with the
// owner: the worker sees the step's input, streams deltas, journals its
// calls and sends heartbeats on the step's subjects, and answers once;
// it never needs KV or stream access.
//
// One step, as the owner runs it (docs/agent.md, "Writing an agent in
// another language", has the worker's side):
//
//	subscribe  baton.agent.<dep>.*.<token>   (deltas, heartbeats, journal, reply)
//	request    baton.agent.<dep>.step        reply to baton.agent.<dep>.reply.<token>
//	           no responders: again with backoff, for at most UnavailableAfter,
//	           then the step fails with agent_unavailable
//	wait       the reply; a worker silent past HeartbeatTimeout fails the step
//	           (agent_timeout); a cancelled step context publishes
//	           baton.agent.<dep>.cancel.<token>
//	serve      journal requests on baton.agent.<dep>.journal.<token> through the
//	           step's runtime.Journal, and pages of what the request sent by
//	           reference on baton.agent.<dep>.history
//
// The shapes are wire's (wire.AgentStepRequest, wire.AgentStepReply, …),
// versioned and frozen in wire/testdata/agent. A reply that is not valid —
// not JSON, another protocol version, not its schema — fails the step with
// result_invalid; a valid one is then checked like any agent's result.
//
// owner.RemoteAgent and bin/owner --agent nats build an Agent; tests and
// programs that run a runtime/pool Owner themselves use New.
package remote
