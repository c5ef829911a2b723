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
