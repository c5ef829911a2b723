// Package rolling holds Baton's rolling-upgrade test (the runbook of
// docs/operations.md): the real topology on loopback — a three-node NATS
// cluster (in process, R3), two bin/owner processes and one bin/ingress per
// deployment (blue, green) — moving a population of sessions from blue to
// green the way docs/operations.md describes, under faults (an owner
// SIGKILLed, a NATS node stopped and restarted), while the test checks from
// outside — the public event stream, the session records' history, the demo
// agent's execution logs and SSE clients — that every accepted command is
// applied exactly once and in order, one owner holds each session at any
// moment, no committed step runs twice, and event streams have no gap. It has
// no non-test code.
package rolling
