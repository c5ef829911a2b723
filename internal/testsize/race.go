//go:build race

package testsize

// Race reports whether the test binary was built with the race detector.
const Race = true
