// Package natsd is the one place that starts an embedded nats-server with
// JetStream: for `make run` (cmd/owner --nats-only) and an owner binary
// (package owner) with an empty --nats-url, for tests (random port, temporary store) and for the
// in-process three-node cluster.
//
// Durability: by default the file store fsyncs every SyncInterval (2 minutes
// in nats-server 2.15); an acknowledged write survives a process crash but an
// OS crash or power loss may lose up to that interval. Config.SyncAlways
// fsyncs every write (`sync_interval: always`); see docs/nats-layout.md for
// its measured cost.
package natsd
