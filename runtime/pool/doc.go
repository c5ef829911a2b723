// Package pool runs session machines (package runtime) against JetStream:
// it owns the consumers, the clock and the goroutines, performs the
// machine's effects in order and feeds their results back.
//
// One Owner serves one owner process of one deployment. It answers start
// requests on baton.deploy.<deploymentID>.start (queue group of the
// deployment's pool; a new session or a handoff successor, as
// protocol.DecodeStart tells them apart) and wake requests, and runs every
// session it loads in its own goroutine:
//
//	boot:  add the session to this process's index (before claiming),
//	       claim the record by CAS (epoch+1, this run, this deployment),
//	       publish any outbox left by the previous run,
//	       create consumer <sessionID>-<epoch> at Applied.Next over every token,
//	       delete the predecessor's consumer
//	loop:  commands from the consumer → machine; step results → machine;
//	       Commit = ONE CAS of the session record (checkpoint, applied
//	       commands, events as outbox) — only then Publish (message ID
//	       <sessionID>/<seq>, expected last subject sequence), timers, tasks,
//	       alias claims, purges, clean-up.
//
// A commit whose reply is lost is settled by a leader read of the record
// (writer run ID + write counter); a CAS conflict stops the session at once
// with no further side effect.
//
// Durability (docs/runtime.md §6): the process holds a lease
// (baton_owners/lease.<processID>, TTL, renewed every TTL/4) before it
// resumes its index, and fences itself — every session stops, nothing is
// served — when it has not renewed for TTL − TTL/4. Peers watch the leases:
// when a process of their deployment dies, one of them takes its key over
// by a conditional write and wakes each of its sessions through the
// deployment's wake queue group (Owner.Wake), where they are claimed afresh.
// An orphan sweeper adopts what the watch missed. A lost consumer is
// recreated at the lowest unapplied sequence only while the record still
// names the run.
package pool
