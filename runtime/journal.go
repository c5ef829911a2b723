package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// Durable effects. A step's calls to the outside world — a model, a tool,
// a payment API — go through Do, which records each call's result in the
// step's journal before it returns it:
//
//	answer, err := in.Do(ctx, "model", func(ctx context.Context, key string) ([]byte, error) {
//		return callModel(ctx, key, messages) // key: the call's idempotency key
//	})
//
// When the step runs again because its result was not committed (its
// owner died, froze past its lease, or drained mid-step), each call whose
// result was journaled returns that result again, in order, without
// calling fn; the first call with no journaled result runs fn. So a
// journaled call is made at most once; a call whose process died before
// its result was recorded runs again — pass key to the external API so it
// can drop the repeat. See docs/agent.md, "Durable effects".
//
// The journal belongs to the step's inputs: a re-run with a different
// StepInput (a delivery steered in before it) starts afresh. A re-run with
// the same inputs that asks for another name at a recorded position fails
// the step with code nondeterministic_step.

// EffectFunc is one journaled call: it gets the call's context and its
// stable idempotency key, and returns the result to record.
type EffectFunc func(ctx context.Context, key string) ([]byte, error)

// Journal records a step's calls. The driver provides one per step in the
// step's context ([WithJournal]); agents use [StepInput.Do].
type Journal interface {
	// Do returns the recorded result of the step's next call, or runs fn,
	// records its result (or final error) and returns it.
	Do(ctx context.Context, name string, fn EffectFunc) ([]byte, error)
}

type journalKey struct{}

// WithJournal returns ctx carrying the step's journal.
func WithJournal(ctx context.Context, j Journal) context.Context {
	return context.WithValue(ctx, journalKey{}, j)
}

// Do runs fn as the step's next journaled call named name (see above).
// Without a journal in ctx (a unit test calling Step directly) it calls fn
// with the key the driver would give the first call of that name; nothing
// is recorded.
//
// The error of a journaled call is recorded too: a re-run gets it back as
// an *EffectError with the same message, without calling fn. An error of
// the journal itself (the store unreachable after retries) is returned
// unrecorded; the step should fail.
func (in StepInput) Do(ctx context.Context, name string, fn EffectFunc) ([]byte, error) {
	if j, ok := ctx.Value(journalKey{}).(Journal); ok && j != nil {
		return j.Do(ctx, name, fn)
	}
	return fn(ctx, EffectKey(in.SessionID, in.TurnID, in.Step, 1, name))
}

// DoJSON is Do for a result marshalled as JSON.
func DoJSON[T any](ctx context.Context, in StepInput, name string, fn func(ctx context.Context, key string) (T, error)) (T, error) {
	var out T
	b, err := in.Do(ctx, name, func(ctx context.Context, key string) ([]byte, error) {
		v, err := fn(ctx, key)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("runtime: journaled result of %q: %w", name, err)
	}
	return out, nil
}

// EffectKey is the idempotency key of call n (1-based) of a step:
// <session>/<turn>/<step>/<n>/<name>, stable across re-runs.
func EffectKey(sessionID, turnID string, step, n int, name string) string {
	return sessionID + "/" + turnID + "/" + strconv.Itoa(step) + "/" + strconv.Itoa(n) + "/" + name
}

// EffectError is a journaled call's recorded error, as a re-run gets it.
type EffectError struct {
	Name    string // the call's name
	Message string // fn's error message when it was recorded
}

func (e *EffectError) Error() string {
	return fmt.Sprintf("journaled call %q failed: %s", e.Name, e.Message)
}

// NondeterministicError fails a step whose re-run asked for a different
// call than the one recorded at a position (code nondeterministic_step).
type NondeterministicError struct {
	Position  int    // 1-based call index
	Recorded  string // the recorded call's name
	Requested string // the name the re-run asked for
}

func (e *NondeterministicError) Error() string {
	return fmt.Sprintf("nondeterministic step: call %d was %q when its result was recorded, the re-run asks for %q",
		e.Position, e.Recorded, e.Requested)
}
