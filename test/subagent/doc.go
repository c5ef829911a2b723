// Package subagent holds Baton's end-to-end tests of subagents
// (docs/runtime.md, "Subagents"): a parent session delegates turns to child
// sessions through named handles (the demo agent's /spawn, /spawnbg,
// /continue and /close), against a real embedded nats-server, with owners
// in the test's process (runtime/pool through internal/harness/inproc) or,
// where faults are involved, as owner subprocesses (bin/owner, built with
// the race detector) that are SIGKILLed. It checks from outside — both
// sessions' public event streams, their records and checkpoints, and the
// demo agent's execution logs — that a child is created once on its exact
// deployment, its result is applied once by its parent, a parent with an
// active child or a child wait is not idle (no handoff; handoff.skipped
// reason child), waits surface on the parent, cancel and close cascade to
// the child, and that, for both sessions, every accepted command is applied
// once, event seqs are contiguous and no committed step runs twice. It has
// no non-test code.
package subagent
