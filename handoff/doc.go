// Package handoff is Baton's atomic handoff (docs/handoff.md): an idle session
// moves from its owner on one deployment (the source) to an owner process of
// another, exact deployment (the candidate) with no owner gap. The session
// record's revision CAS is the only fence: the candidate's claim is ONE CAS
// against the revision the source staged, and the source's way back is a CAS
// against that same revision, so exactly one of them can win.
//
// # Source side
//
// When the machine emits runtime.Handoff, the driver calls Txn.Run. The
// transaction is a pure Plan (no I/O, no clock) driven by a small executor:
//
//	stage          CAS record active → handoff (outcome "staged") at the held revision R0 → R1
//	mark           create the marker (handoff ID, source run, target, trigger seq, R1), create-only
//	check-backlog  leader read of every inbox subject from trigger+1: anything → reclaim, "queued"
//	start          request baton.deploy.<target>.start {deploymentId, handoffId, sessionId, expectedRevision: R1}
//	confirm        leader read: the record shows this handoff completed → Moved
//	reclaim        (failure, refusal, uncertain start) CAS handoff → active at R1: success fences the candidate
//	cleanup        delete the marker if it is still this handoff's
//
// A write whose answer is lost, or a lost CAS, is settled by a leader read
// classified by Classify (source, staged, reclaimed, target, other); an
// uncertain start is settled by the reclaim CAS, never by a read. The
// verdict: Moved (exit), Kept (hold Result.Session, process the trigger),
// Lost (exit, write nothing), or — only with an error — Unknown (stop,
// write nothing; a later claim resolves it).
//
// # Candidate side
//
// A start responder calls Activate: load the record at
// exactly the expected revision (kv.SessionAt: a leader read that waits for
// the revision, so a stale replica never refuses), verify the record and the
// marker name this handoff and this deployment, validate the checkpoint,
// then claim by one CAS (epoch+1, new run, this deployment, state active,
// consumer <sessionID>-<epoch>, outcome "completed"). A request whose
// handoff already completed returns the recorded result (Replayed) without
// a write.
//
// # What stays
//
// The marker exists only while a handoff is in flight; Clean removes a
// leftover one. The last handoff's outcome stays in the session record
// (record.HandoffOutcome). Resolve reports a staged or marked session as alive
// and mid-handoff, never as "no session". The crash-point table, with the
// recovery rule at each point, is in docs/handoff.md.
//
// handoff never imports kv: it declares Store and Reader, the subsets of a
// record store it uses (kv.Store implements them; runtime/pool holds the
// compile-time check), and imports record, subjects, protocol and
// internal/failpoint only (scripts/deps.sh).
package handoff
