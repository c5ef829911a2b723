package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// History roles of the structured entry shape (state version 3).
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Entry kinds: what the runtime recorded in a structured entry besides a
// plain message (Kind empty).
const (
	EntryInputResponse = "input.response" // an answer to an input request (role user)
	EntryAuthCallback  = "auth.callback"  // an authorization result (role user)
	EntryTaskResult    = "task.result"    // a background task's result (role user)
	EntrySummary       = "summary"        // what compaction left (role system)
)

// ToolCall is one tool call of an assistant entry: Arguments is JSON (an
// object, as the model produced it).
type ToolCall struct {
	ID        string          `json:"id" jsonschema:"minLength=1,maxLength=256"`
	Name      string          `json:"name" jsonschema:"minLength=1,maxLength=256"`
	Arguments json.RawMessage `json:"arguments"`
}

// Usage is what a step, a turn or a session consumed, as the agent
// reported it. Every member is optional. The token limits count
// InputTokens + OutputTokens (Tokens).
type Usage struct {
	InputTokens  int64   `json:"inputTokens,omitempty" jsonschema:"minimum=0"`
	OutputTokens int64   `json:"outputTokens,omitempty" jsonschema:"minimum=0"`
	CachedTokens int64   `json:"cachedTokens,omitempty" jsonschema:"minimum=0"`
	CostUSD      float64 `json:"costUsd,omitempty" jsonschema:"minimum=0"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens,
		CachedTokens: u.CachedTokens + o.CachedTokens, CostUSD: u.CostUSD + o.CostUSD,
	}
}

// Tokens is the count the token limits use: input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Validate refuses negative members.
func (u Usage) Validate() error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedTokens < 0 || u.CostUSD < 0 || u.CostUSD != u.CostUSD {
		return errors.New("usage members must not be negative")
	}
	return nil
}

// legacyRoles maps each role of the legacy entry shape to its structured
// role and kind (docs/wire.md, "History entries").
var legacyRoles = map[string][2]string{
	"user":    {RoleUser, ""},
	"agent":   {RoleAssistant, ""},
	"input":   {RoleUser, EntryInputResponse},
	"auth":    {RoleUser, EntryAuthCallback},
	"task":    {RoleUser, EntryTaskResult},
	"summary": {RoleSystem, EntrySummary},
}

// Structured reports whether e uses the state version 3 shape.
func (e HistoryEntry) Structured() bool {
	return e.Kind != "" || e.Content != nil || e.ToolCalls != nil || e.ToolCallID != "" || e.IsError
}

// Migrate returns e in the structured shape: a legacy entry's role maps to
// its structured role and kind, its text becomes one text part (Data, which
// no owner ever wrote, is dropped). A structured entry is returned as it is.
func (e HistoryEntry) Migrate() HistoryEntry {
	if e.Structured() {
		return e
	}
	rk, ok := legacyRoles[e.Role]
	if !ok { // a legacy entry of an unknown role keeps its role
		rk = [2]string{e.Role, ""}
	}
	return HistoryEntry{Role: rk[0], Kind: rk[1], Content: []Part{{Type: PartText, Text: e.Text}}}
}

// Compact returns a structured entry in the legacy shape when that shape
// says the same: a role and kind the legacy table has, and one text part
// (or none) and nothing else. Any other entry is returned as it is.
func (e HistoryEntry) Compact() HistoryEntry {
	if !e.Structured() || e.ToolCalls != nil || e.ToolCallID != "" || e.IsError || e.Text != "" || e.Data != nil {
		return e
	}
	text, ok := singleText(e.Content)
	if !ok {
		return e
	}
	for legacy, rk := range legacyRoles {
		if rk[0] == e.Role && rk[1] == e.Kind {
			return HistoryEntry{Role: legacy, Text: text}
		}
	}
	return e
}

func singleText(parts []Part) (string, bool) {
	switch {
	case len(parts) == 0:
		return "", true
	case len(parts) == 1 && parts[0] == Part{Type: PartText, Text: parts[0].Text}:
		return parts[0].Text, true
	}
	return "", false
}

// ValidateEntry checks a history entry of either shape.
func ValidateEntry(e HistoryEntry) error {
	if !e.Structured() {
		if e.Role == "" {
			return errors.New("role is empty")
		}
		return nil
	}
	return e.validateStructured()
}

// validateStructured checks a structured entry: its role, its parts, its
// tool calls (assistant only) and tool result (tool only).
func (e HistoryEntry) validateStructured() error {
	switch e.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return fmt.Errorf("role %q is not system, user, assistant or tool", e.Role)
	}
	if e.Text != "" || e.Data != nil {
		return errors.New("a structured entry has content, not text or data")
	}
	for i, p := range e.Content {
		if err := p.validateHistory(); err != nil {
			return fmt.Errorf("content[%d]: %w", i, err)
		}
	}
	if len(e.ToolCalls) > 0 && e.Role != RoleAssistant {
		return errors.New("only an assistant entry has toolCalls")
	}
	for i, c := range e.ToolCalls {
		if c.ID == "" || c.Name == "" || !json.Valid(c.Arguments) {
			return fmt.Errorf("toolCalls[%d] needs an id, a name and JSON arguments", i)
		}
	}
	if (e.ToolCallID != "" || e.IsError) && e.Role != RoleTool {
		return errors.New("only a tool entry has toolCallId or isError")
	}
	if e.Role == RoleTool && e.ToolCallID == "" {
		return errors.New("a tool entry needs its toolCallId")
	}
	return nil
}

// validateHistory is a message part's rule, except that a text part of a
// history entry may be empty (an agent's empty answer).
func (p Part) validateHistory() error {
	if p.Type == PartText && p.Text == "" && p.URL == "" {
		return nil
	}
	return p.validate()
}

// PayloadText joins the text of a delivery's messages with newlines: the
// delivery's Text.
func PayloadText(payloads []Payload) string {
	var texts []string
	for _, p := range payloads {
		if p.Message != nil {
			texts = append(texts, p.Message.texts()...)
		}
	}
	return strings.Join(texts, "\n")
}

// CompactInput is in as a checkpoint stores it: a delivery whose payloads
// are one plain-text message and nothing else keeps only Text (readable by
// every state version); any other keeps its Payloads and no Text (state
// version 3).
func CompactInput(in TurnInput) TurnInput {
	if in.Payloads == nil {
		return in
	}
	if plainText(in.Payloads, in.Text) {
		in.Payloads = nil
		return in
	}
	in.Text = ""
	return in
}

// ExpandInput is the inverse of CompactInput, once out-of-line content is
// read back: a delivery without Payloads gets its one plain-text message,
// one with Payloads its joined Text.
func ExpandInput(in TurnInput) TurnInput {
	if in.Kind != KindDeliver || in.Rejected != "" || in.TextRef != nil || in.PayloadsRef != nil {
		return in
	}
	if in.Payloads == nil {
		in.Payloads = []Payload{{Message: TextMessage(in.Text)}}
		return in
	}
	if in.Text == "" {
		in.Text = PayloadText(in.Payloads)
	}
	return in
}

func plainText(ps []Payload, text string) bool {
	if len(ps) != 1 {
		return false
	}
	p := ps[0]
	return p.Message != nil && p.Message.Parts == nil && p.Message.Text == text &&
		p.Context == nil && p.InputResponses == nil && p.OutputSchema == nil && p.Ext == nil
}
