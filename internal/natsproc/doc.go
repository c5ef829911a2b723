// Package natsproc runs a cluster of real nats-server processes for tests:
// the server of go.mod's pin, built once per test binary (as `make images`
// builds it), one process per node with its own configuration file, store
// directory, client port and cluster port. Ports and stores are kept across
// restarts, so clients and peers find a node where it was.
//
// Unlike internal/natsd's in-process cluster, a node here can be SIGKILLed:
// it leaves no goodbye to its peers and hands no leadership over, so every
// stream it led stays leaderless until its peers' Raft election timeouts
// (4–9 s in nats-server 2.15) fire. That is the failure a crashed machine
// or an OOM kill produces, and the one tests of elections need.
package natsproc
