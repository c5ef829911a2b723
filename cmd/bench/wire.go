package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/wire"
)

// Wire figures: each boundary operation timed one call at a time, compared
// with the JetStream publish→consume round trip it rides on.
const (
	wireIters  = 20000
	wireWarmup = 2000
)

// wireV0Deliver is a legacy (unversioned) deliver envelope, decoded through
// the 0→1 migration.
var wireV0Deliver = []byte(`{"type":"deliver","commandId":"cmd-legacy-0001","deploymentId":"dep-2025-11-02",` +
	`"receivedAt":"2025-11-02T09:15:00.250+01:00","payloads":[{"message":"Summarise yesterday's thread, please.",` +
	`"context":["thread: C123.456"],"slackChannel":"C123","slackTs":"1700000000.000100"}]}`)

func benchWire(ctx context.Context, r *bench.Reporter) error {
	cmd := wireSampleDeliver()
	encoded, err := wire.Encode(wire.Current(), cmd)
	if err != nil {
		return fmt.Errorf("wire bench: encode sample: %w", err)
	}
	reg := wire.DefaultEvents()
	event, err := wireSampleEvent(reg)
	if err != nil {
		return err
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"wire_encode_deliver", func() error { _, err := wire.Encode(wire.Current(), cmd); return err }},
		{"wire_decode_deliver", func() error { _, err := wire.Decode(encoded); return err }},
		{"wire_decode_v0_migrate", func() error { _, err := wire.Decode(wireV0Deliver); return err }},
		{"event_validate", func() error { _, err := wire.DecodeEvent(reg, event); return err }},
	}
	for _, o := range ops {
		samples, elapsed, err := wireTime(ctx, o.op)
		if err != nil {
			return fmt.Errorf("wire bench %s: %w", o.name, err)
		}
		r.Latencies(o.name, samples, elapsed, bench.Baseline("js_publish_consume_rtt"),
			bench.Field("bytes", wireOpBytes(o.name, encoded, event)))
	}
	return nil
}

// wireTime warms op up, then times wireIters calls individually.
func wireTime(ctx context.Context, op func() error) ([]time.Duration, time.Duration, error) {
	for range wireWarmup {
		if err := op(); err != nil {
			return nil, 0, err
		}
	}
	samples := make([]time.Duration, 0, wireIters)
	start := time.Now()
	for i := range wireIters {
		if i%1000 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		t0 := time.Now()
		err := op()
		samples = append(samples, time.Since(t0))
		if err != nil {
			return nil, 0, err
		}
	}
	return samples, time.Since(start), nil
}

func wireOpBytes(name string, encoded, event []byte) int {
	switch name {
	case "wire_decode_v0_migrate":
		return len(wireV0Deliver)
	case "event_validate":
		return len(event)
	}
	return len(encoded)
}

// wireSampleDeliver is a typical channel delivery: one text payload with
// context and an adapter extension.
func wireSampleDeliver() wire.Command {
	return wire.Command{
		Kind:                 wire.KindDeliver,
		ID:                   "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0C",
		AcceptedDeploymentID: "dep-2026-03-01",
		AcceptedAt:           time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		IdempotencyKey:       "slack:C123:1700000000.000100",
		Caller:               "slack:U42",
		Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{
			Message: wire.TextMessage("What's the weather in Lisbon tomorrow morning?"),
			Context: []string{"channel: #general"},
			Ext:     map[string]json.RawMessage{"slack": json.RawMessage(`{"channel":"C123","ts":"1700000000.000100"}`)},
		}}},
	}
}

// wireSampleEvent is an encoded message.output event, the most frequent
// event with data worth validating.
func wireSampleEvent(reg *wire.EventRegistry) ([]byte, error) {
	e, err := wire.NewEvent(wire.EventMessageOutput, wire.MessageOutput{TurnID: "t3",
		Text: "Tomorrow morning in Lisbon: 17°C, light wind from the north, no rain expected."})
	if err != nil {
		return nil, fmt.Errorf("wire bench: sample event: %w", err)
	}
	e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID = "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0S", 42, "run-7", "dep-2026-03-01"
	e.Time = time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)
	b, err := wire.EncodeEvent(reg, e)
	if err != nil {
		return nil, fmt.Errorf("wire bench: encode sample event: %w", err)
	}
	return b, nil
}
