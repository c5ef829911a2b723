// Package harness is the one test harness behind Baton's integration tests
// and cmd/e2e: the pieces a test (or the compose end-to-end binary) puts
// together to run Baton for real and watch it from outside.
//
// The core returns errors and takes contexts; it never fails a test, so a
// normal binary (cmd/e2e) uses it too. testing.go is the thin layer for
// tests: T wraps a TB (*testing.T satisfies it) and fails the test where
// the core returns an error, registering every cleanup; bound.go's Test
// binds an Env to one test the same way (Send, Events, the waits for an
// event, a record, a hook or a consumer).
//
// The pieces, each in the file named for it:
//
//   - nats.go: an embedded JetStream server that can be restarted on its
//     port and store, an in-process three-node cluster (internal/natsd),
//     and client connections that reconnect forever;
//   - env.go, state.go: Env, a client of a topology (internal/topology) —
//     connection, JetStream, the kv store, the names — and what it reads of
//     records, hooks and consumers;
//   - commands.go, runner.go: inbox commands, start and wake requests as an
//     ingress would send them, and a goroutine that runs until stopped (an
//     in-process owner; subpackage inproc builds runtime/pool's);
//   - stream.go, events.go, checks.go: a session's events read from
//     JetStream, predicates and extractors over events, and the checks
//     every test shares (seq contiguous, each command applied once);
//   - tail.go, records.go, sse.go, follow.go: observers for a whole run —
//     one ordered consumer over every session's events, a watcher of every
//     revision of baton_sessions, SSE readers of /v1/sessions/{id}/events
//     (one connection, or a follower that resumes with Last-Event-ID);
//   - execlog.go: the demo agent's execution logs (--exec-log files), read
//     once or tailed, and the check that each committed step ran once;
//   - http.go, drain.go, ingress.go: an HTTP client of the ingress API with
//     retries, the paged drain report, an in-process ingress on a real
//     listener;
//   - procs.go: owners and ingresses as subprocesses (internal/proctest),
//     their flags, signals and logs;
//   - poll.go: polling with deadlines — tests never sleep to synchronise;
//   - world.go: World, the recipe the end-to-end suites share (test/poison,
//     test/agentapi, test/remote): a server with the topology, an ingress
//     per deployment on first use, and the HTTP calls every suite makes
//     (create, deliver, events, turns).
//
// It imports neither runtime/pool, runtime/session nor handoff, so the owner packages' own
// (internal) tests can use it; inproc, the in-process owner, does. Only
// tests and cmd/e2e import it (scripts/deps.sh checks both).
package harness
