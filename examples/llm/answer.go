package main

import (
	"fmt"

	"github.com/baton-rt/baton/runtime"
	"github.com/openai/openai-go/v3"
)

// answer is the model's answer to one call: its text, its tool calls in
// order, and the usage of the stream's last chunk.
type answer struct {
	text  string
	calls []toolCall
	usage runtime.Usage
}

// accumulator assembles an answer from a stream's chunks: the first
// choice's content (each piece sent live as it comes), its tool calls
// from their fragments (the first of a call names its index, ID and
// function; the others add to its arguments), and the usage.
type accumulator struct {
	text    []byte
	calls   []toolCall
	byIndex map[int64]int // a call's index in the stream → calls
	usage   runtime.Usage
	choices bool // a chunk with a choice arrived
	shown   bool // some text went live
}

// add folds chunk c in; a chunk that is not a Chat Completions chunk is
// ErrInvalidResponse.
func (acc *accumulator) add(c openai.ChatCompletionChunk, live runtime.Stream) error {
	if !c.JSON.Choices.Valid() && !c.JSON.Usage.Valid() {
		return fmt.Errorf("%w: a chunk without choices or usage: %.200s", ErrInvalidResponse, c.RawJSON())
	}
	if c.JSON.Usage.Valid() {
		u := c.Usage
		acc.usage = runtime.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedTokens: u.PromptTokensDetails.CachedTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 { // one answer is asked for (n = 1)
			continue
		}
		acc.choices = true
		d := ch.Delta
		if text := d.Content + d.Refusal; text != "" {
			acc.text = append(acc.text, text...)
			live.Text(text)
			acc.shown = acc.shown || live.Live()
		}
		for _, tc := range d.ToolCalls {
			acc.fragment(tc)
		}
	}
	return nil
}

// fragment adds one tool call fragment: a new index, or a new ID at a
// known index (a server that numbers every call 0), starts a call.
func (acc *accumulator) fragment(tc openai.ChatCompletionChunkChoiceDeltaToolCall) {
	if acc.byIndex == nil {
		acc.byIndex = map[int64]int{}
	}
	i, ok := acc.byIndex[tc.Index]
	if !ok || tc.ID != "" && acc.calls[i].ID != "" && tc.ID != acc.calls[i].ID {
		acc.calls = append(acc.calls, toolCall{})
		i = len(acc.calls) - 1
		acc.byIndex[tc.Index] = i
	}
	c := &acc.calls[i]
	if c.ID == "" {
		c.ID = tc.ID
	}
	if c.Name == "" {
		c.Name = tc.Function.Name
	}
	c.Arguments += tc.Function.Arguments
}

// answer is the assembled answer of a stream that ended; one without any
// choice, or with a tool call without a name, is ErrInvalidResponse.
func (acc *accumulator) answer() (answer, error) {
	invalid := func(format string, args ...any) (answer, error) {
		return answer{}, &ModelError{Code: CodeModelInvalidResponse, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidResponse}, args...)...)}
	}
	if !acc.choices {
		return invalid("the stream ended without an answer (no chunk with a choice)")
	}
	for i, c := range acc.calls {
		if c.Name == "" {
			return invalid("tool call %d (id %q) names no function", i, c.ID)
		}
	}
	return answer{text: string(acc.text), calls: acc.calls, usage: acc.usage}, nil
}
