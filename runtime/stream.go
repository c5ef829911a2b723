package runtime

import (
	"context"
	"log/slog"
)

// Live output. A step may show partial output while it runs (a model's
// tokens as they arrive) through its step context:
//
//	func (a *Agent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
//		live := in.Stream(ctx)
//		for chunk := range modelChunks {
//			live.Text(chunk)
//		}
//		return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{runtime.Output(full)}}, nil
//	}
//
// Deltas are not durable: the driver publishes them on core NATS (subject
// baton.live.<sessionID>) and the ingress forwards them to SSE clients as
// message.delta events, which carry no seq. Nothing waits for them and a
// delta may be dropped (a slow client, a full buffer); the step's durable
// result (its message.output) is what counts, and follows them. When a
// step's deltas will never be committed (it failed, was cancelled, timed
// out, or is re-run after a crash) a message.discarded event tells clients
// to drop them. See docs/agent.md, "Streaming".

// Sink receives one step's live output. The driver provides one per step
// in the step's context ([WithSink]); agents use [StepInput.Stream].
type Sink interface {
	// Text sends a delta of the step's output text. It must not block
	// beyond a small buffer, and is a no-op once the step is over.
	Text(delta string)
}

type sinkKey struct{}

// WithSink returns ctx carrying the step's sink (for drivers, and for
// tests of an agent that streams).
func WithSink(ctx context.Context, s Sink) context.Context {
	return context.WithValue(ctx, sinkKey{}, s)
}

// Stream is a step's live output: [StepInput.Stream] returns it. The zero
// Stream (a context without a sink: a unit test, a driver that streams
// nothing) discards what it is given.
type Stream struct{ sink Sink }

// Stream returns the live output of the step ctx runs. Call it with the
// context Step was given (or one derived from it).
func (in StepInput) Stream(ctx context.Context) Stream {
	s, _ := ctx.Value(sinkKey{}).(Sink)
	return Stream{sink: s}
}

// Text sends delta, a piece of the step's output text, to live clients.
// Empty deltas are ignored. It never blocks the step beyond a small
// buffer; deltas beyond the buffer are dropped (counted by the driver).
func (s Stream) Text(delta string) {
	if s.sink != nil && delta != "" {
		s.sink.Text(delta)
	}
}

// Live reports whether the stream goes anywhere (false for the zero
// Stream): an agent may skip building deltas nobody receives.
func (s Stream) Live() bool { return s.sink != nil }

type loggerKey struct{}

// WithLogger returns ctx carrying the step's logger (for drivers).
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger is the logger of the step ctx runs: the owner process's log with
// the session, turn and step as attributes, so an agent's own lines (a
// retried model call, a tool that failed) sit beside the runtime's. Without
// one in ctx (a unit test) it discards.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
