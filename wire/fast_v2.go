package wire

import "strconv"

// The typed reads of what inbox version 2 added: the envelope members of a
// parent's command and the bodies of child.result, child.waiting and
// child.resumed (fast.go reads the rest).

// parentOrChild reads the members version 2 added to the envelope.
func (d *cmdDecoder) parentOrChild(k []byte, m *seen, c *Command) bool {
	s := &d.s
	switch string(k) {
	case "parentSessionId":
		m.add(mParent)
		c.ParentSessionID = s.string()
		return c.ParentSessionID != "" // minLength 1 when present
	case "handle":
		m.add(mHandle)
		c.Handle = s.string()
		return c.Handle != ""
	case "depth":
		m.add(mDepth)
		n, err := strconv.Atoi(string(s.number()))
		c.Depth = n
		return err == nil && n != 0 // 0 would read as absent; minimum 1
	case "childResult":
		m.add(mChildResult)
		c.ChildResult = d.childResult()
	case "childWaiting":
		m.add(mChildWaiting)
		c.ChildWaiting = d.childWaiting()
	case "childResumed":
		m.add(mChildResumed)
		c.ChildResumed = d.childWaiting()
	default:
		return false
	}
	return !s.bad
}

func (d *cmdDecoder) childResult() *ChildResult {
	var r ChildResult
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "handle":
			m.add(1)
			r.Handle = s.string()
		case "childSessionId":
			m.add(2)
			r.ChildSessionID = s.string()
		case "commandId":
			m.add(4)
			r.CommandID = s.string()
		case "turnId":
			m.add(8)
			r.TurnID = s.string()
		case "outcome":
			m.add(16)
			r.Outcome = s.string()
		case "outputs":
			m.add(32)
			r.Outputs = d.strings()
		case "usage":
			m.add(64)
			r.Usage = d.usage()
		case "error":
			m.add(128)
			r.Error = s.string()
			return r.Error != "" // minLength 1 when present
		case "ended":
			m.add(256)
			r.Ended = s.string()
			return r.Ended != ""
		default:
			return false
		}
		return !s.bad
	})
	return &r
}

// strings reads an array of strings (never null).
func (d *cmdDecoder) strings() []string {
	s := &d.s
	if !s.open('[') {
		return nil
	}
	out := []string{}
	for first := true; s.more(&first, ']'); {
		out = append(out, s.string())
	}
	return out
}

// usage reads a Usage as encoding/json does: integer members by
// strconv.ParseInt, costUsd by strconv.ParseFloat.
func (d *cmdDecoder) usage() Usage {
	var u Usage
	s := &d.s
	integer := func(v *int64) bool {
		n, err := strconv.ParseInt(string(s.number()), 10, 64)
		*v = n
		return err == nil
	}
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "inputTokens":
			m.add(1)
			return integer(&u.InputTokens) && !s.bad
		case "outputTokens":
			m.add(2)
			return integer(&u.OutputTokens) && !s.bad
		case "cachedTokens":
			m.add(4)
			return integer(&u.CachedTokens) && !s.bad
		case "costUsd":
			m.add(8)
			f, err := strconv.ParseFloat(string(s.number()), 64)
			u.CostUSD = f
			return err == nil && !s.bad
		}
		return false
	})
	return u
}

func (d *cmdDecoder) childWaiting() *ChildWaiting {
	var w ChildWaiting
	s := &d.s
	d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "handle":
			m.add(1)
			w.Handle = s.string()
		case "childSessionId":
			m.add(2)
			w.ChildSessionID = s.string()
		case "requestId":
			m.add(4)
			w.RequestID = s.string()
			return w.RequestID != "" // minLength 1 when present
		case "attemptId":
			m.add(8)
			w.AttemptID = s.string()
			return w.AttemptID != ""
		case "question":
			m.add(16)
			w.Question = s.string()
		default:
			return false
		}
		return !s.bad
	})
	return &w
}
