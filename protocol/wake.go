package protocol

import "encoding/json"

// WakeRequest is the body of a request on baton.deploy.<deploymentId>.wake
// (queue group of the deployment's pool, the same as start): make sure the
// session runs. Whichever owner process receives it claims the session by a
// fresh CAS (epoch+1) unless it already runs, or runs on another live
// process. Takeover sends one per session of a dead process, so the claims
// spread over the live peers.
type WakeRequest struct {
	SessionID string `json:"sessionId"`
	// From names the owner process the sender adopts for: the sender holds
	// that process's lease key, so a record still naming it is claimed.
	From string `json:"from,omitempty"`
	// Source says who asks, for metrics and logs only.
	Source WakeSource `json:"source,omitempty"`
	// Forwarded marks a wake passed on by a process of another deployment
	// that found the session hibernated on this one; it is not passed on
	// again.
	Forwarded bool `json:"forwarded,omitempty"`
}

// WakeSource names the sender of a wake (the `source` label of
// baton_owner_wakes_total).
type WakeSource string

// Wake sources.
const (
	WakeIngress  WakeSource = "ingress"  // the ingress after an acknowledged publish
	WakeTask     WakeSource = "task"     // the task runner after publishing a result
	WakeSweeper  WakeSource = "sweeper"  // the inbox sweeper found an unprocessed command
	WakeSelf     WakeSource = "self"     // the re-check after hibernating found one
	WakeResume   WakeSource = "resume"   // an owner process resuming its index
	WakeTakeover WakeSource = "takeover" // adoption of a dead process's sessions
	WakeRestart  WakeSource = "restart"  // a failed run restarted
	WakeChild    WakeSource = "child"    // a parent or child session sent it a command
	WakeFinish   WakeSource = "finish"   // an owner carried out an operator's retry
	WakeExpire   WakeSource = "expire"   // the idle sweep loads a session to end it (idle_expired)
	WakeOther    WakeSource = "other"    // counted for a request without a source
)

// WakeReply answers a WakeRequest. Error is set when the session could not
// be loaded now (the sender retries); any outcome is final. Its error codes:
// CodeBadRequest, CodeUnavailable, CodeConflict, CodeAtCapacity,
// CodeWaitsPending.
type WakeReply struct {
	SessionID string      `json:"sessionId"`
	Outcome   WakeOutcome `json:"outcome,omitempty"`
	ProcessID string      `json:"processId,omitempty"` // the process that runs it, when known
	Error     *ReplyError `json:"error,omitempty"`
}

// WakeOutcome is where a woken session is.
type WakeOutcome string

// Wake outcomes.
const (
	WakeLoaded    WakeOutcome = "loaded"    // claimed now; runs in the replying process
	WakeRunning   WakeOutcome = "running"   // already runs in the replying process
	WakeElsewhere WakeOutcome = "elsewhere" // owned by another process (ProcessID) or deployment
	WakeEnded     WakeOutcome = "ended"     // the session ended and its owner cleans up
	WakeMissing   WakeOutcome = "missing"   // no such session record
	// WakeQuarantined: the session is quarantined (docs/driver.md,
	// "Quarantine"); no owner runs it until an operator retries or ends it.
	// The replying process may have quarantined it just now.
	WakeQuarantined WakeOutcome = "quarantined"
	// WakeDeferred: the session does not run yet and the replying process
	// is on it: its last boot attempts failed and the next is not due yet
	// (the quarantine backoff; the replying process tries it then), or a
	// claim of it is in progress there. Ask again to learn where it runs;
	// the sweepers take it on if that process dies first.
	WakeDeferred WakeOutcome = "deferred"
)

// DecodeWake decodes a wake request; unknown fields are ignored. Errors wrap
// ErrMalformed.
func DecodeWake(data []byte) (WakeRequest, error) {
	var req WakeRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return WakeRequest{}, malformed("wake request", err)
	}
	return req, nil
}
