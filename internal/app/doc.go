// Package app holds what the binaries share: the common flags and their
// validation (every value checked before anything runs; --help and
// --version), the signal handling of Main (a first SIGINT, SIGTERM or SIGHUP ends
// the context, a second one exits at once), the slog set-up (text on a
// terminal, JSON otherwise; one value per key, no nil values, durations as
// Go duration strings) and the NATS connection with reconnects. Only cmd/*
// and owner (the owner binaries' Main) import it; none of its types
// appears in owner's exported API.
package app
