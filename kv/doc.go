// Package kv is Baton's typed store over JetStream KV: session records,
// address hooks and handoff markers, owner-process leases, per-process
// session indexes, process registrations, the quarantine index and
// deployment records, in the buckets baton_sessions,
// baton_hooks and baton_owners (created by topology.Ensure; every key is
// built by package subjects). docs/kv-records.md shows each record layout
// and the `nats kv get` command that prints it. It also holds the leader
// reads of Baton's streams (Stream, Backlog).
//
// # The contract
//
//   - Ownership is decided by a revision compare-and-swap, never by a read.
//     Every write other than an index entry is create-only or a CAS at the
//     revision the caller read; a conditional delete at a stale revision
//     deletes nothing. Revision 0 is refused for CAS writes and deletes
//     (jetstream would treat it as "unconditional" or "must not exist").
//   - Create-only writes (CreateSession, CreateHook, CreateMarker,
//     AcquireLease, TakeoverLease, PutDeployment at revision 0) succeed on a
//     missing key and over a delete, purge or TTL-expiry marker, and fail on a
//     live value with an *record.OwnedError describing the holder. A hook tombstone
//     is a live value: an ended session's address is never claimed again.
//   - Reads come in two kinds. GetSession, GetHook and GetDeployment are
//     direct gets: any replica may answer, so on a cluster they can be stale
//     and are hints. LeaderSession, SessionAt, Settle, GetMarker and every
//     read inside a create or a retire loop ask the stream leader
//     (STREAM.MSG.GET under the jetstream.JetStream's API prefix or domain),
//     which holds every write it acknowledged; SessionAt retries briefly
//     until the leader holds the revision asked for (just after a leader
//     change it may not yet).
//   - A leader read outlives a leader change. A stream without a leader (a
//     few seconds after its leader's node dies) leaves the request
//     unanswered, so each request waits at most a second (or the jetstream
//     default timeout if shorter) and is sent again with backoff until the
//     caller's deadline, or the jetstream default timeout when ctx has none.
//     An answer — the message, not found, an API error other than
//     "temporarily unavailable" — is final.
//   - Children lists a session's children by their alias hooks
//     (child.<parent>.<handle>.<g>), the parent → child index the hooks
//     already are: every hook key is listed (the alias is one subject
//     token), then each child's hook read by direct get; for ending a
//     session whose checkpoint cannot be decoded, never a hot path.
//   - Stream and Backlog are the same leader reads on any stream: a message
//     by sequence, the last one on a subject, the next one on a subject
//     from a sequence (runtime/eventlog's last event, an inbox command), and the
//     handoff's backlog check over the inbox stream (Backlog implements
//     handoff.Backlog).
//   - Index entries, process registrations (RegisterProcess,
//     ListProcesses) and the quarantine index (AddQuarantined,
//     ListQuarantined) are hints in baton_owners, written by plain puts
//     before the state they point at, and listed by key so that no sweep
//     reads every session record (docs/kv-records.md, "What a sweep
//     reads"); whatever they lead to is decided by a CAS.
//   - RequestFinish is the ingress's narrow intent API: an operator's end or
//     retry written into a quarantined record, which an owner carries out.
//   - An uncertain write (lost reply) is settled by Settle: a leader read of
//     the record's writer run ID and write counter. Never retry blindly at
//     the same revision: a landed write would make the retry conflict with
//     itself.
//   - Leases carry a per-key TTL. AcquireLease, RenewLease and TakeoverLease
//     publish to $KV.<bucket>.<key> with an expected last subject sequence
//     and a message TTL, because kv.Update drops the TTL. Expiry leaves a
//     server marker that WatchLeases reports as Expired. TakeoverLease writes
//     at that marker's revision, so the dead holder's RenewLease (at its old
//     revision) fails with record.ErrConflict for good. The owners bucket must keep
//     History 1: with more, nats-server 2.15 stretches every message TTL to
//     the bucket's marker TTL, and kv refuses a lease TTL it would stretch.
//
// # Errors
//
// Upstream errors are translated at this boundary only: record.ErrConflict (lost
// CAS), record.ErrNotFound, *record.OwnedError (matches record.ErrExists and record.ErrConflict),
// record.ErrInvalid (refused before writing) and record.ErrTooLarge. KV-method errors are
// mapped with errors.Is against jetstream.ErrKeyRevisionMismatch and
// ErrKeyExists, which nats.go matches for both wrong-last-sequence codes
// (10071 single server, 10164 replicated stream). Create-only writes go
// through kv.Update(key, value, 0|markerRevision) rather than kv.Create:
// kv.Create retries over a marker found by a direct get and returns a raw,
// unmapped 10164 when that retry loses on a replicated bucket. The lease
// publish path and the raw leader read are not KV methods; there, and only
// there, the API error code is read (see mapPublishErr).
//
// A replicated stream also refuses a CAS with 10164 while the key's previous
// write is acknowledged but not yet applied, though nothing else wrote. A
// conditional update or delete that loses therefore asks the stream leader
// where the key is: still at the expected revision, the same CAS is sent
// again (a few times, backing off); moved, it is a conflict.
//
// A *Store is safe for concurrent use and keeps no state besides handles.
package kv
