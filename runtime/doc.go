// Package runtime holds the owner program's pure core: the session state
// machine (one ordered input queue, admission, turn policy, step retries
// ([RetryPolicy]), waits, idle eligibility, the handoff decision, timeout
// and finalization) and the [Agent] interface that user code implements
// (with [Retryable] for its transient errors).
//
// The machine imports no NATS, reads no clock and starts no goroutine, in the
// style of etcd raft's RawNode/Ready split. Its rules are written in
// docs/runtime.md; every test uses them as the oracle.
//
// # The canonical loop
//
// A driver (runtime/session, run by the owner process runtime/pool) owns
// the consumer, the clock, the agent and the goroutines. It claims the
// session record, builds the machine from the record's [Snapshot] with
// [NewMachine], and then:
//
//	effects, err := m.Handle(runtime.Boot{Now: now, Reason: reason})
//	for {
//		perform effects in order, feeding each result back:
//		  Commit        → one CAS of the record with Commit.Snapshot (state,
//		                  applied record and the new events as the outbox)
//		                  → Handle(CommitDone{OK | Conflict | Uncertain})
//		  ResolveCommit → leader read: the record holds Writer → CommitDone{OK},
//		                  otherwise CommitDone{Conflict}
//		  Publish       → append the events (msg ID <sessionID>/<seq>)
//		  RunStep       → run the agent ([Run]) with a cancellable context,
//		                  after RunStep.Retry.After for a retry (its journal
//		                  replayed) → Handle(StepDone{...})
//		  CancelStep    → cancel that context now
//		  Handoff       → the handoff transaction → Handle(HandoffDone{...})
//		  SendCommands  → store each in its receiver's inbox; a child-creating
//		                  one whose deployment has no live owner
//		                  → Handle(SendsPending{...}), retried off the loop
//		                  (PendingSends) → Handle(SendsLeft{...}) once stored
//		  ArmTimer, StartTask, ClaimAlias, Purge, Cleanup → idempotent I/O
//		  Forget        → delete those applied commands from the inbox
//		                  → Handle(Forgotten{deleted, kept})
//		meanwhile read every available command: Handle(Received{cmd}), also
//		while a step runs; Handle(Tick{now}) as time passes
//	}
//
// # Ordering contract
//
//   - Nothing is visible before it is durable: Publish, ArmTimer, StartTask,
//     ClaimAlias, Purge, Forget and Cleanup are emitted only after the Commit that
//     records them returned CommitDone{CommitOK}, and in that order (publish
//     first). A Publish must complete (retry with backoff) before the driver
//     performs the next Commit, because that commit replaces the outbox.
//   - At most one of {step, commit, handoff} is in flight. A step runs only
//     against committed state; its result becomes durable in the commit of
//     the next boundary, together with the commands that boundary applies and
//     their command.applied events (exactly one per applied command). A
//     boundary admits commands up to a budget of what they add to its
//     commit (wire.MaxBoundaryBytes); the rest stay queued and the next
//     boundary runs as soon as the commit lands.
//   - CommitConflict stops the machine at once: no further effects; every
//     later input returns [ErrStopped]. So does HandoffDone{Moved: true}.
//   - On boot the machine re-publishes the record's outbox (idempotent),
//     re-arms or re-publishes the timer, and for an ended record repeats the
//     clean-up. After a crash the driver recreates the consumer at
//     Snapshot.Applied.Next and feeds everything again; processed sequences
//     and recent IDs are skipped, an uncommitted step runs again (the
//     documented at-least-once boundary for agent side effects).
package runtime
