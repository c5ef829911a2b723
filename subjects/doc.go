// Package subjects owns every NATS subject, stream, consumer, bucket and KV
// key name that Baton uses, and the token encoding that turns a raw address
// (a session ID, a Slack thread "C123.456", an e-mail Message-ID) into one
// subject token.
//
// Nothing else in the project concatenates a subject or a key: callers build
// names through [Names] and parse them back through its Parse methods.
//
// Token encoding (see [EncodeToken]): bytes in [A-Za-z0-9_-] stand for
// themselves; every other byte, including the escape byte '=', becomes '='
// followed by two upper-case hex digits. The result is reversible, injective,
// a valid single NATS subject token and a valid JetStream KV key, readable for
// plain names, and bounded by [MaxTokenLen].
//
// This package is a leaf: it imports only the standard library.
package subjects
