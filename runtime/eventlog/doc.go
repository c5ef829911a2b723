// Package eventlog appends a session's events to its JetStream event
// subject, exactly once and without a gap (Appender): one at a time, or a
// commit's events as one fast batch (Batches, AppendAll; the fence is
// argued in docs/architecture.md, "Events, one batch per commit"). It is
// owner-side: a
// session's events have one writer, the owner that runs the session or
// finishes it (docs/architecture.md, "One writer"), so the ingress, which
// only reads events, never imports it (scripts/deps.sh).
package eventlog
