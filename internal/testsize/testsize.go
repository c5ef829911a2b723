// Package testsize picks test sizes: the size that proves a property in
// `make test`, or the full size an issue names under `make soak`
// (BATON_SOAK=1).
package testsize

import "os"

// Soak reports whether the full soak sizes are asked for.
func Soak() bool { return os.Getenv("BATON_SOAK") == "1" }

// Pick returns normal, or soak under `make soak`.
func Pick(normal, soak int) int {
	if Soak() {
		return soak
	}
	return normal
}

// PickRaced is Pick for a test whose cost is CPU in single-goroutine
// code (wire's agreement tests, runtime's property tests), which the
// race detector slows five- to eightfold: make test runs such a package
// twice, with the race detector at the smaller raced size (which still
// finds a data race in what its goroutines share) and without it at the
// normal size (Makefile, PURE_PKGS). Under make soak: soak, either way.
func PickRaced(normal, raced, soak int) int {
	switch {
	case Soak():
		return soak
	case Race:
		return raced
	}
	return normal
}

// FullSample reports whether a test runs at its normal or soak size, not
// the raced one: a check of what a whole sample reaches (every branch of
// a generator taken at least once) holds only for the whole sample.
func FullSample() bool { return Soak() || !Race }
