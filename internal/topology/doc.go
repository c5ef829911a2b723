// Package topology creates Baton's NATS resources idempotently: the streams
// BATON_INBOX, BATON_EVENTS and BATON_TASKS, the KV buckets baton_sessions,
// baton_hooks and baton_owners, and the object store baton_state.
//
// Ensure is safe to call from every process at every start: a resource that
// matches is left alone; one that differs only in what JetStream can change
// in place (a raised limit, an added subject, a new option) is updated; one
// that differs in what it cannot change (retention, storage type) is an
// *IncompatibleError naming the field and the remedy. docs/nats-layout.md
// lists every resource with its settings.
package topology
