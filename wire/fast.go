package wire

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// The typed fast path of Decode. A document that declares "v":2 (the
// current version) or "v":1 (which version 2 only extends) is read
// straight into Command — exact (case-sensitive) field names, no unknown
// field outside ext, no null where the schema wants a value — and then
// checked by the Go rules (validate.go), which are at least as strict as the
// frozen schema. No generic map and no schema validator run on this path.
//
// The fast path only ever accepts. Everything else goes to the reference
// path (decodeReference: generic parse, migration chain, schema, Go rules),
// which produces the typed error or handles what the fast path declines:
// version-0 documents, version-1 documents that use what only version 2
// has (the 1→2 migration rejects them) and member names that repeat (whose last-wins
// meaning only the generic parse states). TestSchemaAgreement and
// FuzzSchemaAgreement hold the two paths to the same verdict and value.

// verdict is the outcome of a fast path.
type verdict uint8

const (
	declined verdict = iota // not decided here: the reference path decides
	rejected                // the reference path rejects it too (it produces the error)
	accepted
)

// top-level members of a command, as bits of a seen-set.
const (
	mV = 1 << iota
	mKind
	mID
	mDeployment
	mAcceptedAt
	mIdempotency
	mCaller
	mDeliver
	mInputResponse
	mAuthCallback
	mTaskResult
	mTimeout
	mMove
	mParent
	mHandle
	mDepth
	mChildResult
	mChildWaiting
	mChildResumed
)

// seen records a member; a repeated member makes the document ambiguous
// for a typed reader, so it is declined.
type seen struct {
	set uint32
	dup bool
}

func (s *seen) add(bit uint32) {
	if s.set&bit != 0 {
		s.dup = true
	}
	s.set |= bit
}

func (s *seen) has(bit uint32) bool { return s.set&bit != 0 }

// decodeFast reads a version-1 or version-2 command as the current
// version. It returns accepted with the normalized, validated command, or
// a verdict for the reference path.
func decodeFast(b []byte) (Command, verdict) {
	if !utf8.Valid(b) {
		return Command{}, rejected
	}
	d := cmdDecoder{s: jscan{b: b}}
	c, ok := d.command()
	switch {
	case d.dup:
		return Command{}, declined
	case !ok:
		return Command{}, failedVerdict(b, true)
	case d.version == 0:
		return Command{}, declined // version 0, or another version
	case !d.s.end():
		return Command{}, rejected
	case d.version == 1 && c.expressibleInV1() != nil:
		return Command{}, declined // the 1→2 migration words the rejection
	}
	normalizeDecoded(&c)
	if c.validate() != nil {
		return Command{}, rejected
	}
	return c, accepted
}

// normalizeDecoded is normalizeCommand for a command decodeFast built: its
// values are fresh and its raw JSON compact already, so only times and
// empty collections are left to normalize, in place.
func normalizeDecoded(c *Command) {
	c.AcceptedAt = c.AcceptedAt.UTC()
	if c.Deliver != nil {
		for i := range c.Deliver.Payloads {
			p := &c.Deliver.Payloads[i]
			p.Context = nilIfEmpty(p.Context)
			p.InputResponses = nilIfEmpty(p.InputResponses)
			if len(p.Ext) == 0 {
				p.Ext = nil
			}
		}
	}
	if c.Timeout != nil {
		c.Timeout.Deadline = c.Timeout.Deadline.UTC()
	}
	if c.ChildResult != nil {
		c.ChildResult.Outputs = nilIfEmpty(c.ChildResult.Outputs)
	}
}

type cmdDecoder struct {
	s       jscan
	version int  // the "v" read: 1 or 2 (0: none, or another)
	dup     bool // a member name repeats
}

// fastVersion reports whether a "v" token is a version the typed path
// reads.
func fastVersion(tok []byte) int {
	switch string(tok) {
	case "1":
		return 1
	case "2":
		return 2
	}
	return 0
}

// failedVerdict decides a document the typed read failed on. It scans the
// whole document once more: malformed JSON is rejected whatever its
// version; a member name that repeats in any object is declined (under the
// generic parse the last one wins, and could make good what the typed read
// failed on); with version, a document that is not at version 1 or 2 is
// declined too (version 0 goes to the migration chain, other versions fail
// there).
// Anything else is rejected: the typed read states what the schema does.
func failedVerdict(b []byte, version bool) verdict {
	if version && !topFastVersion(b) {
		return declined
	}
	d := dupScan{s: jscan{b: b}}
	d.value(0)
	switch {
	case !d.s.end():
		return rejected // not JSON (or more than one value)
	case d.dup:
		return declined
	case version && (d.nv != 1 || fastVersion(d.v) == 0):
		return declined
	}
	return rejected
}

// topFastVersion reports whether b may be a version-1 or version-2
// document: an object whose top level has a "v" member of 1 or 2, or
// malformed JSON (decided by the caller's full scan).
func topFastVersion(b []byte) bool {
	s := jscan{b: b}
	if !s.open('{') {
		return true
	}
	known := false
	for first := true; s.more(&first, '}'); {
		k := s.key()
		if s.bad {
			break
		}
		if string(k) == "v" {
			known = fastVersion(s.skip()) != 0
			continue
		}
		s.skipValue()
	}
	return known || !s.end()
}

// dupScan reads any JSON value, noting repeated member names and the
// top-level "v".
type dupScan struct {
	s   jscan
	dup bool
	nv  int    // top-level "v" members
	v   []byte // the last top-level "v" value
}

func (d *dupScan) value(level int) {
	s := &d.s
	switch s.peek() {
	case '{':
		s.open('{')
		var keys []string
		for first := true; s.more(&first, '}'); {
			k := s.key()
			if s.bad {
				return
			}
			if slices.Contains(keys, string(k)) {
				d.dup = true
			}
			keys = append(keys, string(k))
			if level == 0 && string(k) == "v" {
				d.nv++
				d.v = s.skip()
				continue
			}
			d.value(level + 1)
		}
	case '[':
		s.open('[')
		for first := true; s.more(&first, ']'); {
			d.value(level + 1)
		}
	default:
		s.skipValue()
	}
}

func (d *cmdDecoder) ok() bool { return !d.s.bad && !d.dup }

// object iterates the members of an object, calling member with each key
// until it returns false or the object ends. A repeated key (by bit) stops
// the iteration with dup set.
func (d *cmdDecoder) object(member func(key []byte, m *seen) bool) seen {
	var m seen
	s := &d.s
	if !s.open('{') {
		return m
	}
	for first := true; s.more(&first, '}'); {
		k := s.key()
		if s.bad || !member(k, &m) {
			s.fail()
			break
		}
		if m.dup {
			d.dup = true
			break
		}
	}
	return m
}

func (d *cmdDecoder) command() (Command, bool) {
	var c Command
	s := &d.s
	m := d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "v":
			m.add(mV)
			if d.version = fastVersion(s.number()); d.version == 0 {
				return false
			}
			c.V = CurrentVersion
		case "kind":
			m.add(mKind)
			c.Kind = Kind(s.string())
		case "id":
			m.add(mID)
			c.ID = s.string()
		case "acceptedDeploymentId":
			m.add(mDeployment)
			c.AcceptedDeploymentID = s.string()
		case "acceptedAt":
			m.add(mAcceptedAt)
			c.AcceptedAt = s.timeValue()
		case "idempotencyKey":
			m.add(mIdempotency)
			c.IdempotencyKey = s.string()
			return c.IdempotencyKey != "" // minLength 1 when present
		case "caller":
			m.add(mCaller)
			c.Caller = s.string()
			return c.Caller != ""
		case "deliver":
			m.add(mDeliver)
			c.Deliver = d.deliver()
		case "inputResponse":
			m.add(mInputResponse)
			r := d.inputResponse()
			c.InputResponse = &r
		case "authCallback":
			m.add(mAuthCallback)
			c.AuthCallback = d.authCallback()
		case "taskResult":
			m.add(mTaskResult)
			c.TaskResult = d.taskResult()
		case "timeout":
			m.add(mTimeout)
			c.Timeout = d.timeout()
		case "move":
			m.add(mMove)
			c.Move = d.move()
		default:
			return d.parentOrChild(k, m, &c)
		}
		return !s.bad
	})
	if !m.has(mV) {
		d.version = 0
	}
	return c, d.ok() && m.has(mKind)
}

func (d *cmdDecoder) deliver() *Deliver {
	var v Deliver
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "mode":
			m.add(1)
			v.Mode = s.string()
		case "payloads":
			m.add(2)
			if !s.open('[') {
				return false
			}
			v.Payloads = []Payload{}
			for first := true; s.more(&first, ']'); {
				p := d.payload()
				if !d.ok() {
					return false
				}
				v.Payloads = append(v.Payloads, p)
			}
		default:
			return false
		}
		return !s.bad
	})
	return &v
}

func (d *cmdDecoder) payload() Payload {
	var p Payload
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "message":
			m.add(1)
			p.Message = d.message()
		case "context":
			m.add(2)
			if !s.open('[') {
				return false
			}
			p.Context = []string{}
			for first := true; s.more(&first, ']'); {
				p.Context = append(p.Context, s.string())
			}
		case "inputResponses":
			m.add(4)
			if !s.open('[') {
				return false
			}
			p.InputResponses = []InputResponse{}
			for first := true; s.more(&first, ']'); {
				p.InputResponses = append(p.InputResponses, d.inputResponse())
				if !d.ok() {
					return false
				}
			}
		case "outputSchema":
			m.add(8)
			if s.peek() != '{' {
				return false
			}
			p.OutputSchema = s.raw()
		case "ext":
			m.add(16)
			if !s.open('{') {
				return false
			}
			p.Ext = map[string]json.RawMessage{}
			for first := true; s.more(&first, '}'); {
				k := s.key()
				if s.bad {
					return false
				}
				p.Ext[string(k)] = s.raw()
			}
		default:
			return false
		}
		return !s.bad
	})
	return p
}

func (d *cmdDecoder) message() *Message {
	s := &d.s
	switch s.peek() {
	case '"':
		return &Message{Text: s.string()}
	case '[':
	default:
		s.fail()
		return nil
	}
	s.open('[')
	parts := []Part{}
	for first := true; s.more(&first, ']'); {
		var p Part
		d.object(func(k []byte, m *seen) bool {
			switch string(k) {
			case "type":
				m.add(1)
				p.Type = s.string()
			case "text":
				m.add(2)
				p.Text = s.string()
			case "url":
				m.add(4)
				p.URL = s.string()
			case "mediaType":
				m.add(8)
				p.MediaType = s.string()
			case "name":
				m.add(16)
				p.Name = s.string()
			default:
				return false
			}
			return !s.bad
		})
		if !d.ok() {
			return nil
		}
		parts = append(parts, p)
	}
	return &Message{Parts: parts}
}

func (d *cmdDecoder) inputResponse() InputResponse {
	var r InputResponse
	s := &d.s
	m := d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "requestId":
			m.add(1)
			r.RequestID = s.string()
		case "value":
			m.add(2)
			r.Value = s.raw()
		default:
			return false
		}
		return !s.bad
	})
	if !m.has(2) { // value is required (null is a value)
		s.fail()
	}
	return r
}

func (d *cmdDecoder) authCallback() *AuthCallback {
	var a AuthCallback
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "attemptId":
			m.add(1)
			a.AttemptID = s.string()
		case "result":
			m.add(2)
			a.Result = s.string()
		case "data":
			m.add(4)
			a.Data = s.raw()
		default:
			return false
		}
		return !s.bad
	})
	return &a
}

func (d *cmdDecoder) taskResult() *TaskResult {
	var t TaskResult
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "taskId":
			m.add(1)
			t.TaskID = s.string()
		case "result":
			m.add(2)
			t.Result = s.raw() // null is a result: "result":null is present
		case "error":
			m.add(4)
			t.Error = s.string()
			return t.Error != "" // minLength 1 when present
		default:
			return false
		}
		return !s.bad
	})
	return &t
}

func (d *cmdDecoder) timeout() *Timeout {
	var t Timeout
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "timerId":
			m.add(1)
			t.TimerID = s.string()
		case "deadline":
			m.add(2)
			t.Deadline = s.timeValue()
		default:
			return false
		}
		return !s.bad
	})
	return &t
}

func (d *cmdDecoder) move() *Move {
	var v Move
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "deploymentId":
			m.add(1)
			v.DeploymentID = s.string()
		case "force":
			m.add(2)
			v.Force = s.boolean()
		default:
			return false
		}
		return !s.bad
	})
	return &v
}
