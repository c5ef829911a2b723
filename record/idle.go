package record

import "github.com/baton-rt/baton/wire"

// Activity is what the idle rule reads of a session: its record state and
// what its checkpoint (or the machine's working state) says is live.
type Activity struct {
	State    State // the record's state; "" where the caller holds the session (the machine)
	Paused   bool
	Input    bool // a human-input request is awaited
	Auth     bool // an authorization callback is awaited
	Tasks    int  // live background tasks
	Children int  // active child handles plus descendants' outstanding waits
	Queued   bool // an unprocessed command is in the inbox (besides a trigger being judged)
	TurnLive bool // a turn is open, or parked without a wait
}

// NotIdle is the idle rule of the session model: "" when the session is
// idle — no unprocessed command, no turn running, no human input or
// authorization awaited, no background task live, not paused, not ended,
// quarantined or mid-handoff — else why not, checked in this order:
// "ended", "quarantined", "busy" (mid-handoff), "paused", "input", "authorization", "task", "child", "queued",
// "busy" (a live turn). The reasons are the handoff.skipped reasons
// (wire.Skip*). The session machine adds its live conditions (booted, a
// step, commit or handoff in flight, a result pending) on top; the ingress
// applies it to a record and its checkpoint (status, drain report).
func NotIdle(a Activity) string {
	switch {
	case a.State == StateEnded:
		return string(StateEnded)
	case a.State == StateQuarantined:
		return string(StateQuarantined)
	case a.State == StateHandoff:
		return wire.SkipBusy
	case a.Paused || a.State == StatePaused:
		return wire.SkipPaused
	case a.Input:
		return wire.SkipInput
	case a.Auth:
		return wire.SkipAuthorization
	case a.Tasks > 0:
		return wire.SkipTask
	case a.Children > 0:
		return wire.SkipChild
	case a.Queued:
		return wire.SkipQueued
	case a.TurnLive:
		return wire.SkipBusy
	}
	return ""
}

// CheckpointActivity is the Activity of a stored session: its record's
// state and its checkpoint's waits and turn; queued says whether its inbox
// holds an unapplied command.
func CheckpointActivity(r SessionRecord, cp wire.Checkpoint, queued bool) Activity {
	w := cp.Waits
	return Activity{State: r.State, Paused: cp.Paused, Input: w.Input != nil, Auth: w.Auth != nil,
		Tasks: len(w.Tasks), Children: cp.ActiveChildren(), Queued: queued, TurnLive: cp.Turn.Live || cp.Debounce != nil}
}
