// Package memory implements the ports of package runtime/session in memory:
// a record store with kv's revision semantics (Records; with markers and
// reads at a revision it is also the handoff transaction's store), an inbox
// stream with cursors (Inbox), event streams (Events), an object store
// (Blobs), timers (Timers) and a scriptable process (Host: the process's
// four ports). A session runs on them
// without a server, so its loop is tested in milliseconds; the
// conformance suites of runtime/session/conformance run against these and
// against the JetStream implementations alike, so both mean the same.
//
// Every type is safe for concurrent use. Faults are injected by the
// exported hooks on each type (a test sets them before the session runs).
package memory
