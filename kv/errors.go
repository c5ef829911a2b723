package kv

import (
	"errors"
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// mapErr translates an error of a jetstream KV method. Only errors.Is is
// used: nats.go maps both wrong-last-sequence codes (10071 on a single
// server, 10164 for a replicated stream) to ErrKeyRevisionMismatch for
// Update and Delete/Purge, so a lost CAS on R3 maps exactly as on R1.
func mapErr(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %s %s: %w", record.ErrConflict, op, key, err)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %s %s: %w", record.ErrNotFound, op, key, err)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return fmt.Errorf("%w: %s %s: %w", record.ErrInvalid, op, key, err)
	case tooLarge(err):
		return fmt.Errorf("%w: %s %s: %w", record.ErrTooLarge, op, key, err)
	}
	return fmt.Errorf("kv: %s %s: %w", op, key, err)
}

// tooLarge reports a value the server refused for its size: larger than
// the bucket's maximum message size (10054), or than the server's maximum
// payload.
func tooLarge(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
		errors.Is(err, nats.ErrMaxPayload)
}

// mapPublishErr translates the error of a raw CAS publish to $KV.<bucket>.<key>
// (the lease writes, which must carry a per-message TTL that kv.Update cannot
// set). That path is not a KV method, so nats.go does not wrap its answer in
// ErrKeyRevisionMismatch, and jetstream.ErrKeyExists only matches 10071:
// this is the one place a raw error code is read. 10071 ("wrong last
// sequence: N") is what a single server answers; a replicated stream also
// answers 10164 ("wrong last sequence", another proposal for the subject is
// in flight). Both mean the CAS lost.
func mapPublishErr(op, key string, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return fmt.Errorf("%w: %s %s: %w", record.ErrConflict, op, key, err)
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return fmt.Errorf("%w: %s %s: %w", record.ErrTooLarge, op, key, err)
		}
	}
	return mapErr(op, key, err)
}

// ErrEventGap means an event would leave a hole in a session's seq: the
// Appender refuses it.
var ErrEventGap = errors.New("kv: event seq gap")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{record.ErrInvalid}, args...)...)
}

// ErrAgentMismatch is matched by an *AgentMismatchError.
var ErrAgentMismatch = errors.New("kv: the deployment belongs to another agent")

// AgentMismatchError refuses registering a deployment for an agent other
// than the one it belongs to.
type AgentMismatchError struct {
	DeploymentID string
	Agent        string // the agent it belongs to
	Want         string // the agent asked for
}

func (e *AgentMismatchError) Error() string {
	return fmt.Sprintf("kv: deployment %s belongs to agent %s, not %s (a deployment never changes agents; give agent %s's build a new deployment ID)",
		e.DeploymentID, e.Agent, e.Want, e.Want)
}

// Is matches ErrAgentMismatch.
func (e *AgentMismatchError) Is(target error) bool { return target == ErrAgentMismatch }
