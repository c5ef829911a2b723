// Package ingress is Baton's front door for channel services (docs/api.md
// ): the HTTP API and the same operations as the NATS micro service
// baton-ingress. docs/api.md is the reference, with curl and nats examples.
//
// # The contract
//
//   - Stamp. Every command carries acceptedDeploymentId = this ingress's
//     deployment (Config.Deployment, --deployment-id). Request bodies are
//     strict — exact member names, each once, none null, nothing after the
//     object — so a body can never set the stamp (400 bad_request).
//   - Nothing durable before acceptance. A request is parsed and its command
//     encoded (wire.Encode, current version) before anything is looked up;
//     a refused request writes nothing to a stream or a bucket.
//   - Resume-first. A delivery by alias or session ID resolves the address's
//     hook (baton_hooks/tok.<token>) and the session record. A live session
//     gets the command; a session mid-handoff too (the stream holds it for
//     whichever owner comes next; no replacement is ever started for it); an
//     ended one (tombstone or state ended) is 410; an unknown session ID is
//     404. An alias nobody holds starts a session on this deployment through
//     baton.deploy.<deployment>.start: the owner claims the alias
//     create-only before it replies, so the ingress never publishes to an
//     unclaimed address and, of concurrent first deliveries, one creates
//     the session and the others are told the winner. No owner answering is
//     503 and nothing is created.
//   - Publish, then wake. The command is encoded for the wire version the
//     owning deployment reads — the session record's stamp (re-stamped at
//     every claim and activation), the hook's only when the record has none;
//     a command that version cannot express is 422 unsupported_command and
//     nothing is published — then published to baton.inbox.<token> (message ID:
//     its command ID, or <sessionID>/<commandID> with an idempotencyKey),
//     and every acknowledged publish is followed by a fire-and-forget core
//     NATS publish {"sessionId"} to baton.deploy.<deployment>.wake.
//   - Idempotency (receipts.go). The same key on the same resolved session
//     is one command; a repeat within the inbox's duplicate window returns
//     the first receipt unchanged (seq from the duplicate PubAck, created
//     from the receipts bucket).
//   - Events (hub.go, events.go, sse.go). One hub per watched session with
//     one ordered consumer fans events out to every client of the session;
//     catch-up and ?follow=false use direct gets. The consumer count is the
//     number of watched sessions, never the number of clients.
//   - Large output (refs.go). A message.output whose text the owner stored
//     out of line (data {"turnId","ref"}) is served inline (data
//     {"turnId","text"}, every other member as stored): the content is read
//     from the state object store once per blob for all readers, verified
//     against the ref, and cached by digest. A ref that does not resolve, or
//     content over MaxInlineOutput, passes through with its ref.
//
// # Errors
//
// Every refusal is an *Error wrapping one sentinel (ErrBadRequest,
// ErrUnauthorized, ErrNotFound, ErrGone, ErrConflict, ErrTooLarge,
// ErrUnavailable), written as {"error":{"code","message"}} with the code's
// HTTP status, or over NATS with the headers Nats-Service-Error-Code (the
// status) and Nats-Service-Error (the message). NATS and KV failures are
// unavailable (503): the request may be retried.
//
// The ingress starts without the topology (readyz is 503 until
// topology.Ensure ran) and opens it, and its receipts bucket, on first use.
//
// It speaks to the owners only through the bodies of package protocol
// (start, wake) and the stores; it imports no owner-side package
// (runtime/pool, runtime/session, handoff), which scripts/deps.sh checks.
package ingress
