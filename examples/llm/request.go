package main

import (
	"encoding/json"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/openai/openai-go/v3"
)

// request is the step's Chat Completions request: the system prompt, then
// every entry of the history in order, the tools, and usage in the stream's
// last chunk. The history already holds this step's admitted inputs: the
// runtime appends a delivery's user entry when it admits it, before the
// step runs (docs/agent.md, "History"), so in.Inputs adds nothing.
func (a *Agent) request(in runtime.StepInput) openai.ChatCompletionNewParams {
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(in.History)+1)
	if a.cfg.SystemPrompt != "" {
		msgs = append(msgs, openai.SystemMessage(a.cfg.SystemPrompt))
	}
	for _, e := range in.History {
		msgs = append(msgs, message(e))
	}
	return openai.ChatCompletionNewParams{
		Model: a.cfg.Model, Messages: msgs, Tools: tools(a.own),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
}

// message is the Chat Completions message of one history entry. An entry
// the runtime typed (an input answer, an authorization, a task result) is
// a user message of its text, a summary a system message.
func message(e runtime.Entry) openai.ChatCompletionMessageParamUnion {
	switch e.Role {
	case runtime.RoleSystem:
		return openai.SystemMessage(e.Text())
	case runtime.RoleAssistant:
		return assistant(e)
	case runtime.RoleTool:
		return openai.ToolMessage(e.Text(), e.ToolCallID)
	}
	return user(e.Content)
}

// user is a user message: its text, or content parts when it holds more
// than one text (an image is an image_url part; a file, which Chat
// Completions takes by upload only, is named in a text part).
func user(parts []runtime.Part) openai.ChatCompletionMessageParamUnion {
	if len(parts) == 0 {
		return openai.UserMessage("")
	}
	if len(parts) == 1 && parts[0].Type == wire.PartText {
		return openai.UserMessage(parts[0].Text)
	}
	out := make([]openai.ChatCompletionContentPartUnionParam, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case wire.PartText:
			out = append(out, openai.TextContentPart(p.Text))
		case wire.PartImage:
			out = append(out, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: p.URL}))
		default:
			out = append(out, openai.TextContentPart("[file "+p.Name+" ("+p.MediaType+"): "+p.URL+"]"))
		}
	}
	return openai.UserMessage(out)
}

// assistant is an assistant message: its text (null when it has none) and
// its tool calls.
func assistant(e runtime.Entry) openai.ChatCompletionMessageParamUnion {
	var m openai.ChatCompletionAssistantMessageParam
	if text := e.Text(); text != "" {
		m.Content.OfString = openai.String(text)
	}
	for _, c := range e.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: argumentsText(c.Arguments)},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &m}
}

// argumentsText is a tool call's arguments as the model sent them: a JSON
// string in the history is text that was not JSON (toolCall.wire).
func argumentsText(args json.RawMessage) string {
	var s string
	if len(args) > 0 && args[0] == '"' && json.Unmarshal(args, &s) == nil {
		return s
	}
	return string(args)
}
