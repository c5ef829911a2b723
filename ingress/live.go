package ingress

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Live events on SSE: message.delta and message.discarded (wire.LiveEvent).
//
// A session's hub subscribes (core NATS) to its live subject next to its
// events consumer and queues each live event to its clients in arrival
// order with the durable ones. A live event is sent with an event: line
// and a data: line but no id: line, so a client's Last-Event-ID stays the
// seq of the last durable event and a reconnect replays durable events
// only. A client holds at most liveQueueBytes of unsent deltas: a slow
// client loses deltas (counted), never durable events, and never holds
// up the hub, the owner or other clients.
//
// Per connection, a gate keeps the promise that within one (turnId, step)
// every delta precedes the step's durable output: a delta of a step whose
// durable events this connection has already sent (message.output after
// that step's deltas, turn.step, an error of the step, the turn's end) is
// dropped. The owner hands a step's deltas to NATS before it commits, so
// this only trims a delta that lost a race across the cluster.

// liveQueueBytes bounds the deltas one client may have queued.
const liveQueueBytes = 256 << 10

// liveGateTurns bounds the turns a gate remembers; past it, it forgets
// all (deltas of old turns do not arrive any more).
const liveGateTurns = 256

// toLive decodes a live message of session id: nil if it is malformed,
// another session's or of a kind this build does not know.
func toLive(id string, data []byte) *event {
	l, err := wire.DecodeLive(data)
	if err != nil || l.SessionID != id {
		return nil
	}
	var body any = wire.MessageDiscarded{TurnID: l.TurnID, Step: l.Step}
	switch l.Kind { // DecodeLive checked the data
	case wire.EventMessageDelta:
		var d wire.MessageDelta
		_ = json.Unmarshal(l.Data, &d)
		body = d
	case wire.EventTaskProgress:
		var d wire.TaskProgress
		_ = json.Unmarshal(l.Data, &d)
		body = d
	}
	// Re-encoded from the typed body: exactly the documented fields.
	at := l.Time
	if at.IsZero() {
		at = time.Now()
	}
	msg, err := wire.EncodeLive(l.SessionID, l.DeploymentID, at, body)
	if err != nil {
		return nil
	}
	return &event{kind: l.Kind, data: msg, live: &liveStep{turn: l.TurnID, step: l.Step}}
}

// liveStep is the step a live event is about.
type liveStep struct {
	turn string
	step uint64
}

// liveGate is one connection's record of the steps whose deltas are over.
type liveGate struct {
	closed map[string]uint64 // turn → highest step over
	ended  map[string]bool   // turns over
	last   liveStep          // the step of the last delta sent
}

// allow reports whether a delta of s may still be sent.
func (g *liveGate) allow(s liveStep) bool {
	if g.ended[s.turn] || g.closed[s.turn] >= s.step {
		return false
	}
	g.last = s
	return true
}

// durable notes a durable event sent on the connection.
func (g *liveGate) durable(kind string, envelope []byte) {
	var d struct {
		TurnID string `json:"turnId"`
		Step   uint64 `json:"step"`
	}
	switch kind {
	case wire.EventMessageOutput:
		if g.last.turn != "" {
			g.close(g.last.turn, g.last.step)
		}
	case wire.EventTurnStep, wire.EventErrorKind:
		if dataOf(envelope, &d) && d.TurnID != "" {
			g.close(d.TurnID, d.Step)
		}
	case wire.EventTurnCompleted, wire.EventTurnCancelled:
		if dataOf(envelope, &d) && d.TurnID != "" {
			g.end(d.TurnID)
		}
	}
}

func (g *liveGate) close(turn string, step uint64) {
	g.reset()
	g.closed[turn] = max(g.closed[turn], step)
}

func (g *liveGate) end(turn string) {
	g.reset()
	g.ended[turn] = true
}

// reset makes the maps, and forgets everything past liveGateTurns turns.
func (g *liveGate) reset() {
	if g.closed == nil || len(g.closed)+len(g.ended) > liveGateTurns {
		g.closed, g.ended = map[string]uint64{}, map[string]bool{}
	}
}

// dataOf decodes an envelope's data member into v.
func dataOf(envelope []byte, v any) bool {
	var e struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(envelope, &e) != nil || len(e.Data) == 0 {
		return false
	}
	return json.Unmarshal(e.Data, v) == nil
}

// liveFrame is the SSE frame of a live event: no id: line.
func liveFrame(ev event) []byte {
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(ev.kind)
	b.WriteString("\ndata: ")
	b.Write(ev.data) // one line: compact JSON
	b.WriteString("\n\n")
	return b.Bytes()
}
