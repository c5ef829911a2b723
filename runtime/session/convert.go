package session

import (
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// toWireEvent stamps a machine event with the envelope of this run.
func toWireEvent(sessionID, runID, deployment string, at time.Time, e runtime.Event) wire.Event {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return wire.Event{
		SessionID: sessionID, Seq: e.Seq, Time: at.UTC(), OwnerRunID: runID,
		DeploymentID: deployment, Kind: e.Kind, V: max(e.V, 1), Data: data,
	}
}
