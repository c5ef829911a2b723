// Package agents holds Baton's end-to-end tests of agents and promotion
// (docs/runtime.md R10, docs/api.md "Agents"): real bin/owner (demo agent)
// and bin/ingress processes, each started with --agent-name, against one
// embedded nats-server. They check from outside — HTTP and NATS answers,
// the sessions' public event stream, the session records — that an
// ingress serves its own agent only (baton.ingress.<agent>.*, its own
// micro service and queue group) and refuses a delivery to another agent's
// session with nothing written; that an owner refuses a handoff trigger
// stamped by another agent's deployment (command.rejected, no handoff);
// that a promotion is stamped by every ingress of the agent, so each
// session moves exactly once (and once back on a rollback); and that a
// retired deployment stays retired: its owner refuses to start, its
// ingress stamps the promoted deployment, its sessions are adopted. It has
// no non-test code.
package agents
