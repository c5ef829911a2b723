// Package jsport implements the session's ports (package
// runtime/session) on JetStream and core NATS, for the owner process
// (package runtime/pool):
//
//	Inbox    a session's cursor over its merged FIFO: a pull consumer
//	         <sessionID>-<epoch> on the inbox stream, one filter subject
//	         per token, recreated at Applied.Next; purges and deletes of
//	         applied commands
//	Blobs    out-of-line content in the baton_state object store,
//	         content-addressed
//	Timers   the session's one timer as a message schedule
//	Live     live output on core NATS (baton.live.<sessionID>)
//	Journal  steps' journals in the baton_journal bucket, opened later
//
// The session records (session.Records), the backlog reads and the event
// appender are package kv's and package runtime/eventlog's. Each port
// holds only what it is given: a connection, a JetStream context, the
// subject names. A request lost in a stream's election is sent again
// (bounded); anything else is returned to the session, which decides.
//
// The suites of runtime/session/conformance hold these ports to the same
// behaviour as the in-memory ones (TestConformance).
package jsport
