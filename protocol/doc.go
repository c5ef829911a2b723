// Package protocol owns the request/reply bodies that owner processes and
// ingresses exchange over core NATS: the start of a new session, the start
// of a handoff successor, the wake, the finish of an operator's request
// (FinishRequest), their replies, and the refusal every
// reply can carry with its [Code]. These are the only definitions of those
// shapes; the owner side (runtime/pool, runtime/session, handoff) and the ingress both use
// them, so the ingress needs no owner-side package to speak to an owner.
//
// # Why not wire
//
// wire owns durable shapes: commands, events and checkpoints that outlive
// the process that wrote them, versioned with a frozen schema and a
// migration chain. These bodies live for one request. They still cross a
// boundary between builds during a rolling upgrade, so they are frozen too
// (testdata/, compat_test.go), but by a simpler rule: a field is added only
// if an old reader ignores it, and today's bytes keep their meaning. The
// package is a leaf: it imports the standard library only (scripts/deps.sh
// allows wire and subjects, should a shape ever need them).
//
// # The start subject
//
// baton.deploy.<deployment>.start carries two requests, in one queue group:
// a [StartRequest] (create a session) and a [HandoffStart] (activate a
// handoff successor). A handoff start is the one that names a handoff: a
// non-empty handoffId. [DecodeStart] reads a body once into the new-session
// shape plus that field, says which kind it is ([StartKind]), and decodes a
// handoff start strictly (unknown fields refused). The rule is the one every
// build since handoffs has applied, so old and new senders and receivers
// agree; no field was added for it, because an old owner decodes a handoff
// start strictly and would refuse one.
//
// # Replies
//
// Each reply has an optional error object ([ReplyError]) with a [Code]. A
// reader ignores fields it does not know. Which codes a reply carries, and
// whether the sender retries, is said at each code.
//
// # Wake
//
// [WakeRequest] on baton.deploy.<deployment>.wake (the same queue group)
// asks the pool to make sure a session runs; [WakeReply] says where it runs
// ([WakeOutcome]) or why it could not be loaded now. The ingress and the
// owner's own loops send it, fire-and-forget or as a request; [WakeSource]
// names the sender for the owner's metrics.
package protocol
