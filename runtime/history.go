package runtime

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/baton-rt/baton/wire"
)

// Entry is one entry of a session's history: enough to rebuild the message
// list of an OpenAI- or Anthropic-style API exactly (docs/agent.md,
// "History").
//
// Who appends what is fixed. The runtime appends an entry for every
// command it admits: a delivery as a user entry whose content is the
// delivery's message parts; an input answer, an authorization result and a
// task result as user entries of Kind EntryInputResponse,
// EntryAuthCallback and EntryTaskResult; a compaction's summary as a
// system entry of Kind EntrySummary. The agent appends its own assistant
// and tool entries through [StepResult.History]; a message.output event
// does not append anything by itself.
//
// An entry is never modified once it is in the history: snapshots share
// the history itself, and every copy shares an entry's Content and
// ToolCalls. StepInput.History is the step's own slice (an agent may
// truncate, append or replace entries in it), but the parts it holds are
// the session's: an agent must treat them as read-only (the entries it
// returns in StepResult.History are copied).
type Entry struct {
	Role string `json:"role"` // RoleSystem, RoleUser, RoleAssistant or RoleTool
	// Kind names what the runtime recorded (EntryInputResponse, …); empty
	// for a message.
	Kind    string `json:"kind,omitempty"`
	Content []Part `json:"content,omitempty"`
	// ToolCalls are an assistant entry's tool calls.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and IsError are a tool entry's: the call it answers and
	// whether the tool failed.
	ToolCallID string `json:"toolCallId,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
}

// Part is one piece of content: text, or an image or file by URL.
type Part = wire.Part

// ToolCall is one tool call of an assistant entry.
type ToolCall = wire.ToolCall

// Usage is what a step reported it consumed; the runtime sums it per turn
// and per session.
type Usage = wire.Usage

// Payload is one delivered unit as the channel sent it.
type Payload = wire.Payload

// History roles.
const (
	RoleSystem    = wire.RoleSystem
	RoleUser      = wire.RoleUser
	RoleAssistant = wire.RoleAssistant
	RoleTool      = wire.RoleTool
)

// Kinds of the entries the runtime appends besides messages.
const (
	EntryInputResponse = wire.EntryInputResponse
	EntryAuthCallback  = wire.EntryAuthCallback
	EntryTaskResult    = wire.EntryTaskResult
	EntrySummary       = wire.EntrySummary
	// EntryChildResult is a child's delegated turn's result (role user):
	// "child <handle>: <its outputs>".
	EntryChildResult = "child.result"
)

// TextPart is a text part.
func TextPart(text string) Part { return Part{Type: wire.PartText, Text: text} }

// AssistantText is an assistant entry with one text part.
func AssistantText(text string) Entry {
	return Entry{Role: RoleAssistant, Content: []Part{TextPart(text)}}
}

// ToolResult is a tool entry answering call id with text.
func ToolResult(id, text string, isError bool) Entry {
	return Entry{Role: RoleTool, ToolCallID: id, Content: []Part{TextPart(text)}, IsError: isError}
}

// Text joins the entry's text parts with newlines.
func (e Entry) Text() string {
	var texts []string
	for _, p := range e.Content {
		if p.Type == wire.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Wire is the entry in wire's structured shape.
func (e Entry) Wire() wire.HistoryEntry {
	return wire.HistoryEntry{Role: e.Role, Kind: e.Kind, Content: e.Content, ToolCalls: e.ToolCalls, ToolCallID: e.ToolCallID, IsError: e.IsError}
}

// EntryOf is the entry of a wire history entry of either shape (a legacy
// one migrated).
func EntryOf(h wire.HistoryEntry) Entry {
	h = h.Migrate()
	return Entry{Role: h.Role, Kind: h.Kind, Content: h.Content, ToolCalls: h.ToolCalls, ToolCallID: h.ToolCallID, IsError: h.IsError}
}

// deliveryEntry is the user entry of an admitted delivery: its messages'
// parts in order (a plain-text message is one text part).
func deliveryEntry(c Command) Entry {
	var parts []Part
	for _, p := range c.Payloads {
		switch {
		case p.Message == nil:
		case p.Message.Parts != nil:
			parts = append(parts, p.Message.Parts...)
		default:
			parts = append(parts, TextPart(p.Message.Text))
		}
	}
	if c.Payloads == nil {
		parts = []Part{TextPart(c.Text)}
	}
	return Entry{Role: RoleUser, Content: parts}
}

func typedEntry(kind, text string) Entry {
	return Entry{Role: RoleUser, Kind: kind, Content: []Part{TextPart(text)}}
}

func cloneEntries(es []Entry) []Entry {
	if es == nil {
		return nil
	}
	out := slices.Clone(es)
	for i := range out {
		out[i].Content = slices.Clone(es[i].Content)
		out[i].ToolCalls = slices.Clone(es[i].ToolCalls)
		for j := range out[i].ToolCalls {
			out[i].ToolCalls[j].Arguments = cloneRaw(es[i].ToolCalls[j].Arguments)
		}
	}
	return out
}

func clonePayloads(ps []Payload) []Payload {
	if ps == nil {
		return nil
	}
	out := slices.Clone(ps)
	for i, p := range ps {
		if p.Message != nil {
			m := wire.Message{Text: p.Message.Text, Parts: slices.Clone(p.Message.Parts)}
			out[i].Message = &m
		}
		out[i].Context = slices.Clone(p.Context)
		out[i].InputResponses = slices.Clone(p.InputResponses)
		for j := range out[i].InputResponses {
			out[i].InputResponses[j].Value = cloneRaw(p.InputResponses[j].Value)
		}
		out[i].OutputSchema = cloneRaw(p.OutputSchema)
		if p.Ext != nil {
			out[i].Ext = maps.Clone(p.Ext)
			for k, v := range p.Ext {
				out[i].Ext[k] = cloneRaw(v)
			}
		}
	}
	return out
}

// jsonText is a JSON value as history text (its compact encoding).
func jsonText(v json.RawMessage) string { return string(v) }

// Contents of the tool entries the runtime synthesizes for calls left
// without a result when a turn ends (closeToolCalls).
const (
	ToolCancelled = "cancelled"
	ToolNotRun    = "not run: the turn ended"
)

// danglingScan bounds how far back closeToolCalls looks for tool calls
// without a result (a turn's own entries; older turns were closed when
// they ended).
const danglingScan = 1024

// closeToolCalls appends a tool entry (IsError, content text) for each tool
// call of the history's recent assistant entries that has no tool entry,
// in call order, so the next model request carries no unanswered call:
// providers refuse one. An agent that commits tool calls in one step and
// runs them in a later one leaves them open if the turn ends first.
func (m *Machine) closeToolCalls(text string) {
	h := m.snap.History
	answered := map[string]bool{}
	var open []string
	for i := len(h) - 1; i >= 0 && i >= len(h)-danglingScan; i-- {
		e := h[i]
		if e.Role == RoleTool && e.ToolCallID != "" {
			answered[e.ToolCallID] = true
		}
		for j := len(e.ToolCalls) - 1; j >= 0; j-- {
			if id := e.ToolCalls[j].ID; id != "" && !answered[id] {
				open = append(open, id)
				answered[id] = true
			}
		}
	}
	for i := len(open) - 1; i >= 0; i-- {
		m.snap.History = append(m.snap.History, ToolResult(open[i], text, true))
		m.st.dirty = true
	}
}
