// Package durability holds Baton's crash tests: owner
// processes (bin/owner, built with the race detector) run against an
// embedded nats-server started by the test, and are SIGKILLed, frozen with
// SIGSTOP, or crashed at injected fault points (--fault), while the test
// checks from outside — the public event stream, the session records and
// the demo agent's execution logs — that every accepted command is applied
// exactly once, in order, and no committed step runs twice. It has no
// non-test code.
package durability
