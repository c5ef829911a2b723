package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// appendCommand writes marshal(c) for a normalized, validated command
// without reflection: the same bytes encoding/json writes (field order,
// omitempty, no HTML escaping except inside Message, which encodes itself
// with json.Marshal and so escapes <, > and &). It reports ok false for
// anything it does not write exactly (invalid raw JSON, a time encoding/json
// refuses); the caller then calls marshal, which also words the error.
// TestEncodeAgreement and the agreement fuzz hold it to marshal.
func appendCommand(dst []byte, c *Command) ([]byte, bool) {
	w := cmdWriter{b: dst, ok: true}
	w.raw(`{"v":`)
	w.b = strconv.AppendInt(w.b, int64(c.V), 10)
	w.field("kind", string(c.Kind))
	w.field("id", c.ID)
	w.field("acceptedDeploymentId", c.AcceptedDeploymentID)
	w.time("acceptedAt", c.AcceptedAt)
	w.optional("idempotencyKey", c.IdempotencyKey)
	w.optional("caller", c.Caller)
	w.optional("parentSessionId", c.ParentSessionID)
	w.optional("handle", c.Handle)
	if c.Depth != 0 {
		w.raw(`,"depth":`)
		w.b = strconv.AppendInt(w.b, int64(c.Depth), 10)
	}
	if d := c.Deliver; d != nil {
		w.raw(`,"deliver":{`)
		w.first("mode", d.Mode)
		w.raw(`,"payloads":`)
		if d.Payloads == nil {
			w.raw("null")
		} else {
			w.raw("[")
			for i := range d.Payloads {
				if i > 0 {
					w.raw(",")
				}
				w.payload(&d.Payloads[i])
			}
			w.raw("]")
		}
		w.raw("}")
	}
	if r := c.InputResponse; r != nil {
		w.raw(`,"inputResponse":`)
		w.inputResponse(r)
	}
	if a := c.AuthCallback; a != nil {
		w.raw(`,"authCallback":{`)
		w.first("attemptId", a.AttemptID)
		w.field("result", a.Result)
		w.optionalRaw("data", a.Data)
		w.raw("}")
	}
	if t := c.TaskResult; t != nil {
		w.raw(`,"taskResult":{`)
		w.first("taskId", t.TaskID)
		w.optionalRaw("result", t.Result)
		w.optional("error", t.Error)
		w.raw("}")
	}
	if t := c.Timeout; t != nil {
		w.raw(`,"timeout":{`)
		w.first("timerId", t.TimerID)
		w.time("deadline", t.Deadline)
		w.raw("}")
	}
	if m := c.Move; m != nil {
		w.raw(`,"move":{`)
		w.first("deploymentId", m.DeploymentID)
		if m.Force {
			w.raw(`,"force":true`)
		}
		w.raw("}")
	}
	w.childBodies(c)
	w.raw("}")
	return w.b, w.ok
}

type cmdWriter struct {
	b  []byte
	ok bool
}

func (w *cmdWriter) raw(s string) { w.b = append(w.b, s...) }

// first writes the first member of an object ("name":"value").
func (w *cmdWriter) first(name, v string) {
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
	w.b = appendJSONString(w.b, v)
}

// field writes a later member.
func (w *cmdWriter) field(name, v string) {
	w.b = append(w.b, ',')
	w.first(name, v)
}

// optional writes a later omitempty member.
func (w *cmdWriter) optional(name, v string) {
	if v != "" {
		w.field(name, v)
	}
}

func (w *cmdWriter) time(name string, t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		w.ok = false // encoding/json refuses it
		return
	}
	if _, off := t.Zone(); off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		w.ok = false
		return
	}
	w.b = append(w.b, `,"`...)
	w.b = append(w.b, name...)
	w.b = append(w.b, `":"`...)
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

// rawValue writes raw JSON as encoding/json writes a json.RawMessage:
// "null" for nil, otherwise validated and compacted.
func (w *cmdWriter) rawValue(v json.RawMessage) {
	if v == nil {
		w.raw("null")
		return
	}
	s := jscan{b: v}
	s.skipValue()
	if !s.end() {
		w.ok = false
		return
	}
	if !looseSpace(v) {
		w.b = append(w.b, v...)
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		w.ok = false
		return
	}
	w.b = append(w.b, buf.Bytes()...)
}

func (w *cmdWriter) optionalRaw(name string, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	w.b = append(w.b, `,"`...)
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
	w.rawValue(v)
}

func (w *cmdWriter) inputResponse(r *InputResponse) {
	w.raw("{")
	w.first("requestId", r.RequestID)
	w.raw(`,"value":`)
	w.rawValue(r.Value)
	w.raw("}")
}

func (w *cmdWriter) payload(p *Payload) {
	w.raw("{")
	sep := func(name string) {
		if w.b[len(w.b)-1] != '{' {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '"')
		w.b = append(w.b, name...)
		w.b = append(w.b, `":`...)
	}
	if m := p.Message; m != nil {
		sep("message")
		w.message(m)
	}
	if len(p.Context) > 0 {
		sep("context")
		w.raw("[")
		for i, s := range p.Context {
			if i > 0 {
				w.raw(",")
			}
			w.b = appendJSONString(w.b, s)
		}
		w.raw("]")
	}
	if len(p.InputResponses) > 0 {
		sep("inputResponses")
		w.raw("[")
		for i := range p.InputResponses {
			if i > 0 {
				w.raw(",")
			}
			w.inputResponse(&p.InputResponses[i])
		}
		w.raw("]")
	}
	if len(p.OutputSchema) > 0 {
		sep("outputSchema")
		w.rawValue(p.OutputSchema)
	}
	if len(p.Ext) > 0 {
		sep("ext")
		keys := make([]string, 0, len(p.Ext))
		for k := range p.Ext {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		w.raw("{")
		for i, k := range keys {
			if i > 0 {
				w.raw(",")
			}
			w.b = appendJSONString(w.b, k)
			w.raw(":")
			w.rawValue(p.Ext[k])
		}
		w.raw("}")
	}
	w.raw("}")
}

// message writes what Message.MarshalJSON returns (json.Marshal escapes
// HTML), compacted by the outer encoder (which keeps those escapes).
func (w *cmdWriter) message(m *Message) {
	if m.Parts == nil {
		w.b = appendHTMLString(w.b, m.Text)
		return
	}
	w.raw("[")
	for i, p := range m.Parts {
		if i > 0 {
			w.raw(",")
		}
		w.raw(`{"type":`)
		w.b = appendHTMLString(w.b, p.Type)
		for _, f := range [...]struct{ name, v string }{{"text", p.Text}, {"url", p.URL}, {"mediaType", p.MediaType}, {"name", p.Name}} {
			if f.v != "" {
				w.b = append(w.b, `,"`...)
				w.b = append(w.b, f.name...)
				w.b = append(w.b, `":`...)
				w.b = appendHTMLString(w.b, f.v)
			}
		}
		w.raw("}")
	}
	w.raw("]")
}

// appendHTMLString writes s as encoding/json does with HTML escaping.
func appendHTMLString(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, "<>&") {
		return appendJSONString(dst, s)
	}
	const hex = "0123456789abcdef"
	start := len(dst)
	dst = appendJSONString(dst, s)
	// appendJSONString leaves <, > and & as they are; escape them now
	// (they never occur inside its own escapes).
	out := make([]byte, 0, len(dst)-start+16)
	for _, c := range dst[start:] {
		switch c {
		case '<', '>', '&':
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			out = append(out, c)
		}
	}
	return append(dst[:start], out...)
}

// childBodies writes the bodies of child.result, child.waiting and
// child.resumed (inbox version 2).
func (w *cmdWriter) childBodies(c *Command) {
	if r := c.ChildResult; r != nil {
		w.raw(`,"childResult":{`)
		w.first("handle", r.Handle)
		w.field("childSessionId", r.ChildSessionID)
		w.field("commandId", r.CommandID)
		w.field("turnId", r.TurnID)
		w.field("outcome", r.Outcome)
		if len(r.Outputs) > 0 {
			w.raw(`,"outputs":[`)
			for i, o := range r.Outputs {
				if i > 0 {
					w.raw(",")
				}
				w.b = appendJSONString(w.b, o)
			}
			w.raw("]")
		}
		if r.Usage != (Usage{}) {
			w.usage(r.Usage)
		}
		w.optional("error", r.Error)
		w.optional("ended", r.Ended)
		w.raw("}")
	}
	w.childWaiting("childWaiting", c.ChildWaiting)
	w.childWaiting("childResumed", c.ChildResumed)
}

// usage writes a non-zero Usage as encoding/json does (its float
// formatting is encoding/json's own).
func (w *cmdWriter) usage(u Usage) {
	b, err := json.Marshal(u)
	if err != nil {
		w.ok = false
		return
	}
	w.raw(`,"usage":`)
	w.b = append(w.b, b...)
}

func (w *cmdWriter) childWaiting(name string, v *ChildWaiting) {
	if v == nil {
		return
	}
	w.raw(`,"` + name + `":{`)
	w.first("handle", v.Handle)
	w.field("childSessionId", v.ChildSessionID)
	w.optional("requestId", v.RequestID)
	w.optional("attemptId", v.AttemptID)
	w.optional("question", v.Question)
	w.raw("}")
}
