// Package session runs one session's machine (package runtime) against the
// outside world: it reads the session's inbox, runs the agent's steps,
// performs the machine's effects in order and feeds their results back. It
// talks to the outside only through the ports it declares (ports.go):
//
//	Records   the session record (revision CAS, leader reads) and hooks
//	Inbox     cursors over the session's merged FIFO, purges, deletes of
//	          applied commands (Forget)
//	Appender  the session's event stream, exactly once and gap-free
//	Blobs     out-of-line content (history segments, state, long texts)
//	Timers    the session's one timer
//	Backlog   leader reads of unprocessed commands
//	Process   what belongs to the owner process: lease validity, the
//	          process index, background work, reconnects, drain, the
//	          quarantine slot
//	Handoffs  the handoff transaction
//	Tasks     background tasks
//	Sends     commands to other sessions (subagents)
//
// The owner process (package runtime/pool) implements them on JetStream;
// package runtime/session/memory implements them in memory, and the suites
// of runtime/session/conformance hold both to the same behaviour, so the
// loop is tested here in milliseconds without a server.
//
// One Session is one claimed run of a session (one epoch):
//
//	boot:  open cursor <sessionID>-<epoch> at Applied.Next over every token,
//	       delete the predecessor's cursor (in the background), feed
//	       runtime.Boot (the boot commit re-publishes the previous run's
//	       outbox), restart the live tasks the last commit started
//	loop:  deliveries → machine; step results → machine; ticks → machine
//	       (and purges, the hibernation check); pending child sends'
//	       reports → machine (a sender goroutine per pending send,
//	       sends.go, follows the machine's pendingSends after every input)
//	Commit = ONE CAS of the session record (checkpoint, applied commands,
//	       events as outbox) — only then Publish, timers, tasks, alias
//	       claims, purges, clean-up
//
// The boot always commits (runtime.Boot.Commit): the run's first commit
// clears its claim's mark (record.Unsettled). A commit whose reply is lost
// is settled by a leader read of the record (writer run ID + write
// counter); a CAS conflict stops the session at once with no further side
// effect; a commit refused for the session's own reason (too large,
// invalid) is recorded as a boot attempt (record.Refused) and stops the run
// with ErrCommitRefused. A cursor that ends unexpectedly is re-opened
// at Applied.Next only while a leader read shows the record still names
// this run. Every effect first checks the host's lease: a fenced process
// does nothing more. A step is run with the step timeout and its result
// checked (runtime.Checker) before it is folded; a panic is recovered.
//
// What Run's return means is the caller's to act on: an error is a failed
// run (the pool restarts it after a backoff), Hibernated a quiet session
// that left memory (call Recheck once it is out of the loaded set), Ended a
// finalized session, and none of these a record that moved on.
package session
