// Package conformance holds the suites every implementation of the ports of
// package runtime/session must pass: the record store (Records), the inbox
// and its backlog reads (Inbox), the event appender (Appender) and the
// object store (Blobs). They run against the in-memory implementations
// (package runtime/session/memory) and against the JetStream ones (kv and
// runtime/pool) over a real server, so a session tested on the first
// behaves the same on the second.
//
// Each suite takes a factory that returns a fresh, empty implementation
// for one subtest.
package conformance
