// Package upgrade holds the mixed-build upgrade test, `make test-upgrade`
// (build tag upgrade; docs/upgrade-testing.md): real processes of two
// builds on one NATS server — blue, bin/owner and bin/ingress of the
// previous build (internal/oldbuild.Pin, built from the repository's own
// history), and green, this build's. Sessions move from blue to green
// through green's ingress, one moves back by promoting blue, and one whose
// checkpoint needs a state version blue cannot read is refused by blue's
// candidate before activation and stays on green with nothing lost. Every
// later change to a durable version adds its case here. It has no
// non-test code.
package upgrade
