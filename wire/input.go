package wire

import (
	"errors"
	"strconv"
)

// DecodeInput decodes the inbox payload at stream sequence seq into the
// owner's view of it: the command's Input, or, for a payload Decode
// refuses, its RejectedInput. It never fails: an undecodable command is
// recorded (wire.rejected), never dropped.
func DecodeInput(seq uint64, b []byte) TurnInput {
	c, err := Decode(b)
	if err != nil {
		return RejectedInput(seq, err)
	}
	return c.Input(seq)
}

// Input is c as the owner processes it at stream sequence seq: the envelope
// plus the fields of c's one body, a delivery's messages joined into Text
// and its payloads as sent. A parent's command carries its Parent; a
// child.* command its Child (a wait's request or attempt in RequestID or
// AttemptID); a tag command its Tag; a terminate command its message in
// EndMessage.
func (c *Command) Input(seq uint64) TurnInput {
	in := TurnInput{Seq: seq, ID: c.ID, Kind: c.Kind, Caller: c.Caller, Deployment: c.AcceptedDeploymentID}
	if c.ParentSessionID != "" {
		in.Parent = &ParentRef{SessionID: c.ParentSessionID, Handle: c.Handle, Depth: c.Depth}
	}
	c.childInput(&in)
	switch {
	case c.Deliver != nil:
		in.Mode, in.Text, in.Payloads = c.Deliver.Mode, c.Text(), c.Deliver.Payloads
		in.DebounceMs = c.Deliver.DebounceMs
	case c.InputResponse != nil:
		in.RequestID, in.Value = c.InputResponse.RequestID, c.InputResponse.Value
	case c.AuthCallback != nil:
		in.AttemptID, in.AuthResult, in.Value = c.AuthCallback.AttemptID, c.AuthCallback.Result, c.AuthCallback.Data
	case c.TaskResult != nil:
		in.TaskID, in.Value, in.TaskError = c.TaskResult.TaskID, c.TaskResult.Result, c.TaskResult.Error
	case c.Timeout != nil:
		in.TimerID = c.Timeout.TimerID
	case c.Move != nil:
		in.Target, in.Force = c.Move.DeploymentID, c.Move.Force
	case c.Tag != nil:
		in.Tag = normalizeTag(c.Tag)
	case c.Terminate != nil:
		in.EndMessage = c.Terminate.Message
	case c.Configure != nil:
		in.DefaultMode, in.DefaultDebounceMs = c.Configure.DefaultMode, c.Configure.DefaultDebounceMs
	}
	return in
}

// childInput fills in's Child (and a wait's RequestID or AttemptID) from
// a child.result, child.waiting or child.resumed body.
func (c *Command) childInput(in *TurnInput) {
	if r := c.ChildResult; r != nil {
		in.Child = &ChildRef{Handle: r.Handle, SessionID: r.ChildSessionID, CommandID: r.CommandID,
			TurnID: r.TurnID, Outcome: r.Outcome, Outputs: r.Outputs, Usage: r.Usage, Error: r.Error, Ended: r.Ended}
	}
	w := c.ChildWaiting
	if w == nil {
		w = c.ChildResumed
	}
	if w != nil {
		in.Child = &ChildRef{Handle: w.Handle, SessionID: w.ChildSessionID, Question: w.Question}
		in.RequestID, in.AttemptID = w.RequestID, w.AttemptID
	}
}

// RejectedInput is the owner's view of the payload at seq that failed to
// decode with err: identified by its command ID when the error names one
// (rejected-<seq> otherwise), with the error as its Rejected reason.
func RejectedInput(seq uint64, err error) TurnInput {
	id := ""
	var we *Error
	if errors.As(err, &we) {
		id = we.CommandID
	}
	if id == "" {
		id = "rejected-" + strconv.FormatUint(seq, 10)
	}
	return TurnInput{Seq: seq, ID: id, Kind: KindDeliver, Rejected: err.Error()}
}
