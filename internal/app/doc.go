// Package app holds what both binaries share: the common flags and their
// validation, the slog set-up (tint on a terminal, JSON otherwise) and the
// NATS connection with reconnects. Only cmd/* imports it.
package app
