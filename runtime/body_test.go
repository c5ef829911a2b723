package runtime

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

// bodyCase is one event the machine records: the Fields map it built
// before it used wire's typed bodies (copied from that code: nil is no
// data) and the typed body that replaced it, from the same values.
type bodyCase struct {
	old   func(v bodyValues) (string, Fields)
	typed func(v bodyValues) wire.EventBody
}

// bodyValues are the values the machine puts in a body. IDs (commands,
// turns, waits, tasks) are never empty and steps are at least 1 — the
// machine's own invariants, which wire's omitempty members rely on; every
// other string may be anything, the empty string included.
type bodyValues struct {
	id, turn, wait      string // never empty
	a, b, c, d          string // anything
	seq, epoch          uint64
	step                int // >= 1
	kind                Kind
	code, taskError     string // anything, empty = none
	outputText, caller  string
	handoffID, question string
}

var bodyCases = map[string]bodyCase{
	"session.started": {
		func(v bodyValues) (string, Fields) {
			return EventSessionStarted, Fields{"sessionId": v.a, "deploymentId": v.b}
		},
		func(v bodyValues) wire.EventBody { return wire.SessionStarted{SessionID: v.a, DeploymentID: v.b} },
	},
	"command.applied": {
		func(v bodyValues) (string, Fields) {
			return EventCommandApplied, Fields{"commandId": v.id, "seq": v.seq, "kind": v.kind}
		},
		func(v bodyValues) wire.EventBody {
			return wire.CommandApplied{CommandID: v.id, Seq: v.seq, Kind: string(v.kind)}
		},
	},
	"command.rejected": { // new with the typed bodies: the map it would have been
		func(v bodyValues) (string, Fields) {
			return EventCommandRejected, Fields{"commandId": v.id, "seq": v.seq, "reason": v.d}
		},
		func(v bodyValues) wire.EventBody {
			return wire.CommandRejected{CommandID: v.id, Seq: v.seq, Reason: v.d}
		},
	},
	"command.superseded": {
		func(v bodyValues) (string, Fields) {
			return EventCommandSuperseded, Fields{"commandId": v.id, "seq": v.seq, "by": v.epoch}
		},
		func(v bodyValues) wire.EventBody {
			return wire.CommandSuperseded{CommandID: v.id, Seq: v.seq, By: v.epoch}
		},
	},
	"turn.rolled_back": {
		func(v bodyValues) (string, Fields) {
			return EventTurnRolledBack, Fields{"turnId": v.turn, "calls": []wire.CallRef{{Name: v.a, Step: uint64(v.step), Position: int(v.epoch % 64)}}}
		},
		func(v bodyValues) wire.EventBody {
			return wire.TurnRolledBack{TurnID: v.turn, Calls: []wire.CallRef{{Name: v.a, Step: uint64(v.step), Position: int(v.epoch % 64)}}}
		},
	},
	"turn.started": {
		func(v bodyValues) (string, Fields) {
			return EventTurnStarted, Fields{"turnId": v.turn, "caller": v.caller, "commandId": v.id}
		},
		func(v bodyValues) wire.EventBody {
			return wire.TurnStarted{TurnID: v.turn, Caller: v.caller, CommandID: v.id}
		},
	},
	"turn.step": {
		func(v bodyValues) (string, Fields) { return EventTurnStep, Fields{"turnId": v.turn, "step": v.step} },
		func(v bodyValues) wire.EventBody { return wire.TurnStep{TurnID: v.turn, Step: uint64(v.step)} },
	},
	"turn.step_retried": { // new with the typed bodies: the map it would have been
		func(v bodyValues) (string, Fields) {
			return EventTurnStepRetried, Fields{"turnId": v.turn, "step": v.step, "attempt": v.seq, "code": v.d}
		},
		func(v bodyValues) wire.EventBody {
			return wire.TurnStepRetried{TurnID: v.turn, Step: uint64(v.step), Attempt: v.seq, Code: v.d}
		},
	},
	"message.output": { // Output
		func(v bodyValues) (string, Fields) { return EventMessageOutput, Fields{"text": v.outputText} },
		func(v bodyValues) wire.EventBody { return wire.MessageOutput{Text: v.outputText} },
	},
	"input.requested": {
		func(v bodyValues) (string, Fields) {
			return EventInputRequested, Fields{"requestId": v.wait, "question": v.question}
		},
		func(v bodyValues) wire.EventBody { return wire.InputRequested{RequestID: v.wait, Question: v.question} },
	},
	"auth.requested": {
		func(v bodyValues) (string, Fields) { return EventAuthRequested, Fields{"attemptId": v.wait} },
		func(v bodyValues) wire.EventBody { return wire.AuthRequested{AttemptID: v.wait} },
	},
	"task.started": {
		func(v bodyValues) (string, Fields) { return EventTaskStarted, Fields{"taskId": v.wait} },
		func(v bodyValues) wire.EventBody { return wire.TaskStarted{TaskID: v.wait} },
	},
	"task.completed": {
		func(v bodyValues) (string, Fields) {
			f := Fields{"taskId": v.wait}
			if v.taskError != "" {
				f["error"] = v.taskError
			}
			return EventTaskCompleted, f
		},
		func(v bodyValues) wire.EventBody { return wire.TaskCompleted{TaskID: v.wait, Error: v.taskError} },
	},
	"turn.completed": {
		func(v bodyValues) (string, Fields) { return EventTurnCompleted, Fields{"turnId": v.turn} },
		func(v bodyValues) wire.EventBody { return wire.TurnCompleted{TurnID: v.turn} },
	},
	"turn.completed v2": {
		func(v bodyValues) (string, Fields) {
			return EventTurnCompleted, Fields{"turnId": v.turn, "stopReason": v.a, "usage": map[string]any{}}
		},
		func(v bodyValues) wire.EventBody { return wire.TurnCompletedV2{TurnID: v.turn, StopReason: v.a} },
	},
	"limit.reached": {
		func(v bodyValues) (string, Fields) {
			return EventLimitReached, Fields{"turnId": v.turn, "limit": v.a, "used": int64(v.seq), "max": int64(v.epoch)}
		},
		func(v bodyValues) wire.EventBody {
			return wire.LimitReached{TurnID: v.turn, Limit: v.a, Used: int64(v.seq), Max: int64(v.epoch)}
		},
	},
	"turn.cancelled": {
		func(v bodyValues) (string, Fields) { return EventTurnCancelled, Fields{"turnId": v.turn} },
		func(v bodyValues) wire.EventBody { return wire.TurnCancelled{TurnID: v.turn} },
	},
	"session.waiting": {
		func(v bodyValues) (string, Fields) { return EventSessionWaiting, Fields{"reason": "message"} },
		func(v bodyValues) wire.EventBody { return wire.SessionWaiting{Reason: wire.WaitMessage} },
	},
	"session.paused": {
		func(v bodyValues) (string, Fields) { return EventSessionPaused, nil },
		func(v bodyValues) wire.EventBody { return wire.SessionPaused{} },
	},
	"session.resumed": {
		func(v bodyValues) (string, Fields) { return EventSessionResumed, nil },
		func(v bodyValues) wire.EventBody { return wire.SessionResumed{} },
	},
	"handoff.started": {
		func(v bodyValues) (string, Fields) {
			return EventHandoffStarted, Fields{
				"handoffId": v.handoffID, "targetDeploymentId": v.a,
				"trigger": Fields{"commandId": v.id, "seq": v.seq},
			}
		},
		func(v bodyValues) wire.EventBody {
			return wire.HandoffStarted{HandoffID: v.handoffID, TargetDeploymentID: v.a,
				Trigger: wire.CommandRef{CommandID: v.id, Seq: v.seq}}
		},
	},
	"handoff.skipped": {
		func(v bodyValues) (string, Fields) {
			return EventHandoffSkipped, Fields{
				"reason": v.c, "commandId": v.id, "seq": v.seq,
				"deploymentId": v.a, "targetDeploymentId": v.b,
			}
		},
		func(v bodyValues) wire.EventBody {
			return wire.HandoffSkipped{Reason: v.c, CommandID: v.id, Seq: v.seq, DeploymentID: v.a, TargetDeploymentID: v.b}
		},
	},
	"handoff.completed": {
		func(v bodyValues) (string, Fields) {
			return EventHandoffCompleted, Fields{
				"handoffId": v.handoffID, "fromDeploymentId": v.a, "toDeploymentId": v.b, "epoch": v.epoch,
			}
		},
		func(v bodyValues) wire.EventBody {
			return wire.HandoffCompleted{HandoffID: v.handoffID, FromDeploymentID: v.a, ToDeploymentID: v.b, Epoch: v.epoch}
		},
	},
	"handoff.failed": {
		func(v bodyValues) (string, Fields) {
			return EventHandoffFailed, Fields{"handoffId": v.handoffID, "targetDeploymentId": v.a, "reason": v.d}
		},
		func(v bodyValues) wire.EventBody {
			return wire.HandoffFailed{HandoffID: v.handoffID, TargetDeploymentID: v.a, Reason: v.d}
		},
	},
	"wait.cancelled/input": {
		func(v bodyValues) (string, Fields) {
			return EventWaitCancelled, Fields{"wait": "input", "requestId": v.wait}
		},
		func(v bodyValues) wire.EventBody { return wire.WaitCancelled{Wait: wire.WaitInput, RequestID: v.wait} },
	},
	"wait.cancelled/authorization": {
		func(v bodyValues) (string, Fields) {
			return EventWaitCancelled, Fields{"wait": "authorization", "attemptId": v.wait}
		},
		func(v bodyValues) wire.EventBody {
			return wire.WaitCancelled{Wait: wire.WaitAuthorization, AttemptID: v.wait}
		},
	},
	"wait.cancelled/task": {
		func(v bodyValues) (string, Fields) {
			return EventWaitCancelled, Fields{"wait": "task", "taskId": v.wait}
		},
		func(v bodyValues) wire.EventBody { return wire.WaitCancelled{Wait: wire.WaitTask, TaskID: v.wait} },
	},
	"step.interrupted": {
		func(v bodyValues) (string, Fields) {
			return EventStepInterrupted, Fields{"turnId": v.turn, "step": v.step}
		},
		func(v bodyValues) wire.EventBody { return wire.StepInterrupted{TurnID: v.turn, Step: uint64(v.step)} },
	},
	"wire.rejected": {
		func(v bodyValues) (string, Fields) {
			return EventWireRejected, Fields{"commandId": v.id, "seq": v.seq, "reason": v.d}
		},
		func(v bodyValues) wire.EventBody { return wire.WireRejected{CommandID: v.id, Seq: v.seq, Reason: v.d} },
	},
	"session.ended": {
		func(v bodyValues) (string, Fields) { return EventSessionEnded, Fields{"reason": v.c} },
		func(v bodyValues) wire.EventBody { return wire.SessionEnded{Reason: v.c} },
	},
	"child.started": {
		func(v bodyValues) (string, Fields) {
			return EventChildStarted, Fields{"handle": v.a, "childSessionId": v.b, "deploymentId": v.c}
		},
		func(v bodyValues) wire.EventBody {
			return wire.ChildStarted{Handle: v.a, ChildSessionID: v.b, DeploymentID: v.c}
		},
	},
	"child.completed": {
		func(v bodyValues) (string, Fields) {
			return EventChildCompleted, Fields{"handle": v.a, "childSessionId": v.b, "turnId": v.turn, "outcome": v.c}
		},
		func(v bodyValues) wire.EventBody {
			return wire.ChildCompleted{Handle: v.a, ChildSessionID: v.b, TurnID: v.turn, Outcome: v.c}
		},
	},
	"child.waiting": {
		func(v bodyValues) (string, Fields) {
			f := Fields{"handle": v.a, "childSessionId": v.b}
			for k, x := range map[string]string{"requestId": v.wait, "attemptId": v.d, "question": v.question} {
				if x != "" {
					f[k] = x
				}
			}
			return EventChildWaiting, f
		},
		func(v bodyValues) wire.EventBody {
			return wire.ChildWaitingEvent{Handle: v.a, ChildSessionID: v.b, RequestID: v.wait, AttemptID: v.d, Question: v.question}
		},
	},
	"child.closed": {
		func(v bodyValues) (string, Fields) {
			f := Fields{"handle": v.a}
			if v.b != "" {
				f["childSessionId"] = v.b
			}
			return EventChildClosed, f
		},
		func(v bodyValues) wire.EventBody { return wire.ChildClosed{Handle: v.a, ChildSessionID: v.b} },
	},
	"error": {
		func(v bodyValues) (string, Fields) {
			f := Fields{"message": v.d, "turnId": v.turn, "step": v.step}
			if v.code != "" {
				f["code"] = v.code
			}
			return EventError, f
		},
		func(v bodyValues) wire.EventBody {
			return wire.ErrorData{Message: v.d, Code: v.code, TurnID: v.turn, Step: uint64(v.step)}
		},
	},
}

// oldEvent is the event as the machine built it from a map.
func oldEvent(kind string, f Fields) Event {
	if kind == EventMessageOutput {
		return NewEvent(kind, f) // Output
	}
	if f == nil {
		return Event{Kind: kind} // emit(kind, nil)
	}
	return NewEvent(kind, f)
}

// tricky strings: what JSON escapes, HTML-escapes, or replaces.
var tricky = []string{"", "<&>", "\u2028\u2029", "\xff\xfeinvalid", `"q" \ /`, "ü 🎉", "\t\n\x00", "t1"}

func drawString(t *rapid.T, label string) string {
	return rapid.OneOf(rapid.SampledFrom(tricky), rapid.String()).Draw(t, label)
}

func drawID(t *rapid.T, label string) string {
	return rapid.OneOf(rapid.SampledFrom(tricky[1:]), rapid.StringN(1, -1, -1)).Draw(t, label)
}

func drawValues(t *rapid.T) bodyValues {
	return bodyValues{
		id: drawID(t, "id"), turn: drawID(t, "turn"), wait: drawID(t, "wait"),
		a: drawString(t, "a"), b: drawString(t, "b"), c: drawString(t, "c"), d: drawString(t, "d"),
		seq:   rapid.OneOf(rapid.Uint64(), rapid.Just(uint64(math.MaxUint64)), rapid.Just(uint64(1)<<53+1)).Draw(t, "seq"),
		epoch: rapid.Uint64().Draw(t, "epoch"), step: rapid.IntRange(1, math.MaxInt).Draw(t, "step"),
		kind: rapid.SampledFrom(Kinds()).Draw(t, "kind"),
		code: drawString(t, "code"), taskError: drawString(t, "taskError"),
		outputText: drawString(t, "text"), caller: drawString(t, "caller"),
		handoffID: drawString(t, "handoffID"), question: drawString(t, "question"),
	}
}

// TestBodyEncoding: for every built-in kind the machine records, the typed
// body encodes byte for byte as the map it replaced, over random values
// (every string, the empty one and invalid UTF-8 included; numbers past
// 2^53), and names the same kind.
func TestBodyEncoding(t *testing.T) {
	covered := map[string]bool{}
	for name, c := range bodyCases {
		kind, _ := c.old(bodyValues{})
		covered[kind] = true
		t.Run(name, rapid.MakeCheck(func(t *rapid.T) {
			v := drawValues(t)
			kind, f := c.old(v)
			want, got := oldEvent(kind, f), builtin(c.typed(v))
			if got.Kind != want.Kind || !bytes.Equal(got.Data, want.Data) || (got.Data == nil) != (want.Data == nil) {
				t.Fatalf("typed %s %q (nil %v)\n  map %s %q (nil %v)", got.Kind, got.Data, got.Data == nil, want.Kind, want.Data, want.Data == nil)
			}
		}))
	}
	for _, k := range BuiltinEvents() {
		if !covered[k] {
			t.Errorf("built-in kind %s has no case", k)
		}
	}
	if got, want := Output("hi"), oldEvent(EventMessageOutput, Fields{"text": "hi"}); !bytes.Equal(got.Data, want.Data) {
		t.Errorf("Output: %s, want %s", got.Data, want.Data)
	}
}

// BenchmarkOutput: a MiB of message.output, built inside an agent's step
// (and its step timeout): one encoding pass, as the map took.
func BenchmarkOutput(b *testing.B) {
	text := strings.Repeat("abcdefgh", 1<<17)
	for b.Loop() {
		_ = Output(text)
	}
}
