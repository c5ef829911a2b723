package main

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-rt/baton/internal/bench"
)

// benchChild: subagents.
//
//   - child_turn_rtt: a delivery to a parent whose demo agent delegates to
//     its parked child and waits ("/continue r <text>"), → the parent's
//     message.output "child r: <text>". Two turns, four commits, a send
//     each way and a wake of each session; compare with turn_rtt_inprocess.
//   - child_spawn_rtt: the same for a new handle ("/spawn"): the child is
//     created through the start subject first.
func benchChild(ctx context.Context, e *env, r *bench.Reporter) error {
	rg, err := newRigFor(ctx, e, "bench-child", "bench-child-1")
	if err != nil {
		return err
	}
	defer rg.close()
	n := e.n(200)
	spawns, turns := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	var id string
	for i := range n + 5 {
		if i%turnsPerSession == 0 {
			if id, err = rg.startSession(); err != nil {
				return err
			}
			text := "spawned " + nextID()
			d, err := rg.deliverAndWaitText(ctx, id, nextID(), "/spawn r "+text, "child r: "+text)
			if err != nil {
				return fmt.Errorf("spawn: %w", err)
			}
			if i >= 5 {
				spawns = append(spawns, d)
			}
			continue
		}
		text := "again " + nextID()
		d, err := rg.deliverAndWaitText(ctx, id, nextID(), "/continue r "+text, "child r: "+text)
		if err != nil {
			return fmt.Errorf("continue: %w", err)
		}
		if i >= 5 {
			turns = append(turns, d)
		}
	}
	r.Latencies("child_turn_rtt", turns, 0, bench.Baseline("js_publish_consume_rtt"))
	r.Latencies("child_spawn_rtt", spawns, 0, bench.Baseline("js_publish_consume_rtt"))
	return nil
}
