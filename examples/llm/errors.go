package main

import (
	"errors"
	"time"
)

// Codes of the steps this agent fails (the code of the session's error
// event; docs/agent.md, "The LLM example").
const (
	// CodeModelUnavailable: the model could not be reached or kept
	// answering 429 or 5xx through every retry, or its stream broke off
	// after output was already shown.
	CodeModelUnavailable = "model_unavailable"
	// CodeModelInvalidResponse: the model's answer is not a Chat
	// Completions stream (an unparsable chunk, a chunk without choices or
	// usage, a tool call without a name, a stream that ends without an
	// answer).
	CodeModelInvalidResponse = "model_invalid_response"
	// CodeModelRefused: the model answered the request with another 4xx
	// (400 bad request, 401 bad key, 403, 404 unknown model, …), which a
	// retry would not change.
	CodeModelRefused = "model_refused"
)

// Errors of the calculator tool, shown to the model as the tool's result.
var (
	ErrSyntax         = errors.New("calculator: syntax error")
	ErrDivisionByZero = errors.New("calculator: division by zero")
	ErrOutOfRange     = errors.New("calculator: result out of range")
)

// Errors of the other tools and of a model answer.
var (
	// ErrUnknownTool is the result of a call of a tool the agent does not
	// have.
	ErrUnknownTool = errors.New("llm: unknown tool")
	// ErrArguments is the result of a call whose arguments are not the
	// tool's JSON object.
	ErrArguments = errors.New("llm: invalid tool arguments")
	// ErrNotRemembered is recall's result for a key never remembered.
	ErrNotRemembered = errors.New("llm: nothing remembered under this key")
	// ErrInvalidResponse is what a model answer that is not a Chat
	// Completions stream fails with (CodeModelInvalidResponse).
	ErrInvalidResponse = errors.New("llm: invalid model response")
	// ErrConfig is the error of a bad Config (a usage error of the
	// binary's flags), an MCP server not reached at start included.
	ErrConfig = errors.New("llm: invalid configuration")
	// ErrMCPUnavailable is the result of a tool call whose MCP server is
	// down (restarting) or broke off the call.
	ErrMCPUnavailable = errors.New("llm: MCP server unavailable")
)

// ModelError is a model call that failed: the code the step fails with,
// whether another attempt may succeed, and the wait the server asked for
// (Retry-After; 0: none).
type ModelError struct {
	Code  string
	Retry bool
	Wait  time.Duration
	Err   error
}

func (e *ModelError) Error() string { return e.Code + ": " + e.Err.Error() }

func (e *ModelError) Unwrap() error { return e.Err }
