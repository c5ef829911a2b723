package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Normalization gives every value one in-memory form, so that
// decode(encode(c)) equals c: times in UTC, embedded raw JSON compacted,
// empty collections nil. It copies whatever it changes and never mutates the
// caller's slices or maps.

func normalizeCommand(c Command) Command {
	c.AcceptedAt = c.AcceptedAt.UTC()
	if c.Deliver != nil {
		d := *c.Deliver
		d.Payloads = slices.Clone(d.Payloads)
		for i := range d.Payloads {
			d.Payloads[i] = normalizePayload(d.Payloads[i])
		}
		c.Deliver = &d
	}
	if c.InputResponse != nil {
		r := normalizeInputResponse(*c.InputResponse)
		c.InputResponse = &r
	}
	if c.AuthCallback != nil {
		a := *c.AuthCallback
		a.Data = compactRaw(a.Data)
		c.AuthCallback = &a
	}
	if c.TaskResult != nil {
		t := *c.TaskResult
		t.Result = compactRaw(t.Result)
		c.TaskResult = &t
	}
	if c.Timeout != nil {
		t := *c.Timeout
		t.Deadline = t.Deadline.UTC()
		c.Timeout = &t
	}
	if c.Move != nil {
		m := *c.Move
		c.Move = &m
	}
	normalizeChildBodies(&c)
	if c.Tag != nil {
		c.Tag = normalizeTag(c.Tag)
	}
	normalizeTerminate(&c)
	if c.Configure != nil {
		b := *c.Configure
		c.Configure = &b
	}
	return c
}

// normalizeChildBodies copies the bodies of inbox version 2's child kinds.
func normalizeChildBodies(c *Command) {
	if c.ChildResult != nil {
		r := *c.ChildResult
		r.Outputs = nilIfEmpty(slices.Clone(r.Outputs))
		c.ChildResult = &r
	}
	if c.ChildWaiting != nil {
		w := *c.ChildWaiting
		c.ChildWaiting = &w
	}
	if c.ChildResumed != nil {
		w := *c.ChildResumed
		c.ChildResumed = &w
	}
}

func normalizePayload(p Payload) Payload {
	if p.Message != nil {
		m := *p.Message
		if m.Parts != nil {
			m.Parts = slices.Clone(m.Parts)
		}
		p.Message = &m
	}
	p.Context = nilIfEmpty(slices.Clone(p.Context))
	p.InputResponses = nilIfEmpty(slices.Clone(p.InputResponses))
	for i := range p.InputResponses {
		p.InputResponses[i] = normalizeInputResponse(p.InputResponses[i])
	}
	p.OutputSchema = compactRaw(p.OutputSchema)
	if len(p.Ext) == 0 {
		p.Ext = nil
	} else {
		ext := maps.Clone(p.Ext)
		for k, v := range ext {
			ext[k] = compactOrNull(v)
		}
		p.Ext = ext
	}
	return p
}

func normalizeInputResponse(r InputResponse) InputResponse {
	r.Value = compactOrNull(r.Value)
	return r
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// compactRaw compacts optional raw JSON; empty stays nil. Invalid JSON is
// returned unchanged for the encoder to reject.
func compactRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	if !looseSpace(raw) {
		return raw // already compact (or invalid, for the encoder to reject)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// compactOrNull compacts required raw JSON; empty becomes null.
func compactOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return compactRaw(raw)
}

// looseSpace reports whether v holds a white-space byte outside its
// strings: whether json.Compact would change valid JSON v. (For invalid
// input the answer does not matter: compaction fails and keeps it.)
func looseSpace(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ', c == '\t', c == '\n', c == '\r':
			return true
		}
	}
	return false
}
