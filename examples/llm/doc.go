// Command llm is an owner binary whose agent is an LLM: every step is one
// streamed call of an OpenAI-compatible Chat Completions API (OpenAI,
// vLLM, llama.cpp server, Ollama, LiteLLM) with the session's history,
// plus the tool calls the model answered with. It is built on the public
// packages only: owner.Main with the agent and its own flags
// (owner.WithFlags), runtime for the step contract, and the openai-go SDK.
//
// # Running it
//
// The server and key are the SDK's own environment variables; the flags
// are --model (default gpt-4o-mini), --system-prompt, --model-retries
// (default 4), --model-retry-max-wait (default 30s), --mcp-command and
// --mcp-url (MCP servers, below), plus every flag of bin/owner (--help
// lists them). Against a local Ollama and the NATS
// server of make run, as deployment llm1 (make llm):
//
//	OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_API_KEY=ollama \
//		go run ./examples/llm --deployment-id llm1 --nats-url nats://127.0.0.1:4222 --model llama3.2
//	bin/ingress --deployment-id llm1 --listen 127.0.0.1:8081 --nats-url nats://127.0.0.1:4222 --insecure-dev
//	curl -s -X POST localhost:8081/v1/deliveries -d '{"alias":"llm.1","text":"what is 12*7?"}'
//
// docs/agent.md, "The LLM example", is the whole guide.
//
// # A step
//
// The request is the system prompt, then every history entry in order
// (the runtime has already appended this step's deliveries): user entries
// (an image part as an image_url part), assistant entries with their
// tool_calls, tool entries with their tool_call_id. The answer streams:
// each piece of text goes to the step's live output as it arrives
// (message.delta on SSE), the tool calls are assembled from their
// fragments, and the usage of the last chunk is the step's usage.
//
// An answer with tool calls runs them in the same step — calculator
// (arithmetic: + - * /, parentheses, unary minus, decimals), remember and
// recall (a key's value in the agent's state, StepResult.State) — and
// appends the assistant entry with the calls and one tool entry per result;
// the turn continues with the next step, so the model reads the results.
// A bad call (arguments that are not JSON, an unknown tool, a division by
// zero) is an error result for the model, never a failed step. An answer
// without tool calls is the step's message.output and assistant entry, and
// ends the turn. The model call and the tools it asked for commit
// together, as one step: a step that did not commit runs again whole.
//
// # MCP tools
//
// --mcp-command "<cmd> <args>" (split into words like a shell does:
// blanks, '…', "…", backslashes; no expansion) runs an MCP server as the
// owner's child over its stdin and stdout; --mcp-url <url> reaches one over
// streamable HTTP; both repeat. At start every server is connected and its
// tools listed, and offered to the model after the built-in ones; a server
// not reached, or a tool name that is taken (a built-in, Config.Tools,
// another server's), is a usage error. Each call is a tools/call through
// the journal (a re-run replays it); its text contents are the result, its
// isError the entry's. A server that is down makes the call an isError
// result for the model (journaled like any result), never a failed step;
// the owner restarts a stdio server that exited and reconnects an HTTP one
// (from 250ms, doubling up to 30s), and closes them all when it stops
// (owner.WithCleanup).
//
// # Failures
//
// 429 and 5xx answers, a connection refused and a stream cut off before
// any text was shown are retried within the step (--model-retries times;
// each wait the server's Retry-After or retry-after-ms, else exponential
// from 500ms with jitter, at most --model-retry-max-wait); then the step
// fails with code model_unavailable, as it does at once when a stream
// breaks off after text was shown. Another 4xx (a bad key, an unknown
// model, a bad request) fails it with model_refused, a malformed answer
// (an unparsable chunk, a chunk without choices or usage, no choice at
// all, a tool call without a name, an answer that is not an event stream)
// with model_invalid_response. A failed step ends the turn with an error
// event; the session answers the next delivery as usual. A cancel (POST
// /v1/sessions/{id}/cancel) cancels the step's context, which aborts the
// HTTP request to the model.
package main
