// Package demo is Baton's deterministic demo agent: no model provider, every
// command kind exercisable from plain text.
//
// For every admitted input the agent emits one message.output with
// {"text": <the input text>} (answers, authorization results and task
// results are rendered as "input <id>: <value>", "authorization <attempt>:
// <result>" and "task <id>: <result>"). The last directive among the step's
// deliveries decides the step's outcome:
//
//	/sleep <dur>     a long step: sleeps (context-aware), then continues the
//	                 turn, so a steer sent meanwhile joins the next step
//	/ask <question>  waits for human input
//	/authorize       waits for an authorization callback
//	/task <dur>      starts a background task of that duration; the turn ends
//	/fail            the step fails: an error event, the turn ends
//	/flaky [n]       the step's first n attempts (default 1) in this process
//	                 fail with an error marked runtime.Retryable
//	                 (agent_retryable): the step runs again under the
//	                 owner's --step-retries; the attempt after succeeds
//	/done            the session finishes (session.ended {reason: done})
//	/alias <name>    adds an alias (the turn ends normally)
//	/work <n> <dur>  a turn of n steps (n ≤ 64): each makes one journaled
//	                 call "work", sleeps dur and counts itself in the
//	                 state {"done": <steps of every /work so far>,
//	                 "left": <steps left>, "sleep": <dur>} and reports
//	                 100 input and 10 output tokens
//
// and, to delegate to child sessions (handle[@deployment]; the child is a
// demo agent too and runs text as its own delivery):
//
//	/spawn <handle> <text>     delegates text and waits: the next step sees
//	                           the child's result, rendered "child <handle>:
//	                           <the child's output>"
//	/spawnbg <handle> <text>   delegates without waiting (the turn ends; the
//	                           result joins the history when it arrives)
//	/continue <handle> <text>  a parked handle's next delegated turn (waits)
//	/close <handle>            closes the handle: its child ends (closed)
//
// and, to try the runtime's containment of misbehaving agents:
//
//	/panic           panics in Step (the step fails: agent_panic)
//	/hang            blocks until the step's context ends (step_timeout)
//	/big <n>         one more message.output of n bytes (stored out of line)
//	/badevent        a message.output with an unknown field (event_invalid)
//	/bigstate <n>    keeps n bytes of state (out of line above 128 KiB)
//	/manyevents <n>  n more small message.output events in one step
//
// A step without inputs (the continuation after /sleep) ends the turn. Each
// step is recorded in the [ExecLog] with the agent's process name, so
// tests can prove no committed step ran twice. See docs/agent.md.
package demo
