package session

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// fromWire turns a decoded inbox command into the machine's input.
func fromWire(seq uint64, c wire.Command) runtime.Command {
	rc := runtime.Command{
		Seq: seq, ID: c.ID, Kind: runtime.Kind(c.Kind), Caller: c.Caller,
		Deployment: c.AcceptedDeploymentID,
	}
	switch {
	case c.Deliver != nil:
		rc.Mode, rc.Text = runtime.Mode(c.Deliver.Mode), c.Text()
	case c.InputResponse != nil:
		rc.RequestID, rc.Value = c.InputResponse.RequestID, c.InputResponse.Value
	case c.AuthCallback != nil:
		rc.AttemptID, rc.AuthResult, rc.Value = c.AuthCallback.AttemptID, c.AuthCallback.Result, c.AuthCallback.Data
	case c.TaskResult != nil:
		rc.TaskID, rc.Value, rc.TaskError = c.TaskResult.TaskID, c.TaskResult.Result, c.TaskResult.Error
	case c.Timeout != nil:
		rc.TimerID = c.Timeout.TimerID
	case c.Move != nil:
		rc.Target, rc.Force = c.Move.DeploymentID, c.Move.Force
	}
	return rc
}

// rejected is the machine input for an inbox payload that failed to decode:
// the machine records wire.rejected and never applies it.
func rejected(seq uint64, err error) runtime.Command {
	id := ""
	var we *wire.Error
	if errors.As(err, &we) {
		id = we.CommandID
	}
	if id == "" {
		id = "rejected-" + itoa(seq)
	}
	return runtime.Command{Seq: seq, ID: id, Kind: runtime.KindDeliver, Rejected: err.Error()}
}

// toWireEvent stamps a machine event with the envelope of this run.
func toWireEvent(sessionID, runID, deployment string, at time.Time, e runtime.Event) wire.Event {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return wire.Event{
		SessionID: sessionID, Seq: e.Seq, Time: at.UTC(), OwnerRunID: runID,
		DeploymentID: deployment, Kind: e.Kind, V: 1, Data: data,
	}
}
