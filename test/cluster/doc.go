// Package cluster holds Baton's tests of NATS server failures on a real
// three-node cluster of nats-server processes (internal/natsproc): how long
// Baton's R3 streams and buckets refuse writes while a crashed node's
// leaderships are re-elected, and how the owners' leases ride such an
// election. It has no non-test code.
package cluster
