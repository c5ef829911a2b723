package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
)

// CheckpointEncoder encodes the successive checkpoints of one session from
// cached parts: EncodeCheckpoint's result, byte for byte, without encoding
// again an inline history entry an earlier call encoded. A session's
// inline history grows by a few entries per commit and is sealed into a
// segment at a few KiB, so most of it is the same from one commit to the
// next; encoding it was most of a commit's checkpoint cost.
//
// The zero value is ready to use. An encoder is not safe for concurrent
// use: give each session its own. It keeps a copy of the last checkpoint's
// inline history (entries and their encodings) until the next call.
type CheckpointEncoder struct {
	entries []encodedEntry
}

// encodedEntry is a normalized history entry, held in a copy of its own,
// and its encoding.
type encodedEntry struct {
	entry HistoryEntry
	json  []byte
}

// Encode is EncodeCheckpoint(c), reusing the encodings of the history
// entries the previous call encoded where c's entry at the same position
// is the same.
func (x *CheckpointEncoder) Encode(c Checkpoint) ([]byte, error) {
	return encodeCheckpoint(c, x.history)
}

// encodeCheckpoint is EncodeCheckpoint with the inline history encoded by
// history (nil for none): the history is encoded once, measured for the
// inline limit and put in its place between the other members' encodings.
func encodeCheckpoint(c Checkpoint, history func([]HistoryEntry) ([]byte, error)) ([]byte, error) {
	c = normalizeCheckpoint(c)
	c.StateV = c.lowestVersion()
	hist, herr := history(c.History)
	// A history that does not encode counts 0 bytes against the limit and
	// fails the encoding after the rules, as the whole encoding always did.
	if err := c.validateSized(len(hist)); err != nil {
		return nil, err
	}
	if herr != nil {
		return nil, stateFail(c.StateV, ErrInvalid, "marshal: %v", herr)
	}
	c.stampStored(StoredCommandVersion)
	b, err := encodeAround(&c, hist)
	if err != nil {
		return nil, stateFail(c.StateV, ErrInvalid, "marshal: %v", err)
	}
	return checkEncoded(c.StateV, b)
}

// encodeHistory is a history's encoding, whole (nil for none).
func encodeHistory(hs []HistoryEntry) ([]byte, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	return marshal(hs)
}

// checkEncoded applies the limits of an encoded checkpoint (and, with
// BATON_WIRE_SCHEMA_CHECK=1, its version's schema).
func checkEncoded(v int, b []byte) ([]byte, error) {
	if len(b) > MaxCheckpointBytes {
		return nil, stateFail(v, ErrTooLarge, "%d bytes, limit %d (move history or state to the object store)", len(b), MaxCheckpointBytes)
	}
	if debugSchema {
		if err := debugCheck(checkpointContract(v), b); err != nil {
			return nil, stateFail(v, ErrInvalid, "schema (debug check): %v", err)
		}
	}
	return b, nil
}

// history is the encoding of a normalized inline history, as encoding the
// slice whole gives it (nil for none), from the cached entries where they
// are the same, or the error of an entry that does not encode. The cache
// keeps exactly hs afterwards (none after an error).
func (x *CheckpointEncoder) history(hs []HistoryEntry) ([]byte, error) {
	if len(hs) == 0 {
		x.keep(0)
		return nil, nil
	}
	n := 1 + len(hs) // the brackets and the commas
	var enc *encoder
	defer func() {
		if enc != nil {
			partEncoders.Put(enc)
		}
	}()
	for i, h := range hs {
		if i < len(x.entries) && x.entries[i].entry.same(h) {
			n += len(x.entries[i].json)
			continue
		}
		if enc == nil {
			enc = partEncoders.Get().(*encoder)
		}
		b, err := enc.encode(h)
		if err != nil {
			x.keep(0)
			return nil, err
		}
		e := encodedEntry{entry: h.clone(), json: b}
		if i < len(x.entries) {
			x.entries[i] = e
		} else {
			x.entries = append(x.entries, e)
		}
		n += len(b)
	}
	x.keep(len(hs))
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range x.entries {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e.json...)
	}
	return append(out, ']'), nil
}

// keep keeps the first n cached entries and lets the rest go (a sealed
// tail's entries are not held by the cache's array).
func (x *CheckpointEncoder) keep(n int) {
	clear(x.entries[n:])
	x.entries = x.entries[:n]
}

// encoder encodes as marshal does, into a buffer it keeps. partEncoders
// pools them: a checkpoint's parts and its new history entries are copied
// out of the buffer at once.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var partEncoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// scratch is marshal(v) in e's buffer, valid until e's next use.
func (e *encoder) scratch(v any) ([]byte, error) {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte("\n")), nil
}

// encode is marshal(v), in a slice of its own.
func (e *encoder) encode(v any) ([]byte, error) {
	b, err := e.scratch(v)
	return bytes.Clone(b), err
}

// same reports whether h and o encode the same (both normalized: empty
// collections and raw values nil).
func (h HistoryEntry) same(o HistoryEntry) bool {
	return h.Role == o.Role && h.Text == o.Text && bytes.Equal(h.Data, o.Data) && h.Kind == o.Kind &&
		slices.Equal(h.Content, o.Content) && h.ToolCallID == o.ToolCallID && h.IsError == o.IsError &&
		slices.EqualFunc(h.ToolCalls, o.ToolCalls, func(a, b ToolCall) bool {
			return a.ID == b.ID && a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments)
		})
}

// clone is h with copies of its own of everything a caller could change
// in place (the cache compares with it later).
func (h HistoryEntry) clone() HistoryEntry {
	h.Data = bytes.Clone(h.Data)
	h.Content = slices.Clone(h.Content)
	h.ToolCalls = slices.Clone(h.ToolCalls)
	for i := range h.ToolCalls {
		h.ToolCalls[i].Arguments = bytes.Clone(h.ToolCalls[i].Arguments)
	}
	return h
}

// checkpointSplit is Checkpoint's members before History and after it, as
// two struct types of the same fields in the same order, with the same
// tags: encoding each and putting the history's encoding between them
// gives the encoding of the whole.
var checkpointSplit = splitCheckpoint()

type checkpointPart struct {
	typ    reflect.Type
	fields []int // the Checkpoint field of each of typ's
}

func splitCheckpoint() [2]checkpointPart {
	ct := reflect.TypeFor[Checkpoint]()
	h, _ := ct.FieldByName("History")
	var parts [2]checkpointPart
	var fields [2][]reflect.StructField
	for i := range ct.NumField() {
		if i == h.Index[0] {
			continue
		}
		p := 0
		if i > h.Index[0] {
			p = 1
		}
		f := ct.Field(i)
		fields[p] = append(fields[p], reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
		parts[p].fields = append(parts[p].fields, i)
	}
	for p := range parts {
		parts[p].typ = reflect.StructOf(fields[p])
	}
	return parts
}

// encodeAround encodes c with hist, the encoding of its History, in
// History's place: the members before it (stateV and sessionId are never
// omitted), history unless empty, the members after it.
func encodeAround(c *Checkpoint, hist []byte) ([]byte, error) {
	var enc [2]*encoder
	var parts [2][]byte
	defer func() {
		for _, e := range enc {
			if e != nil {
				partEncoders.Put(e)
			}
		}
	}()
	v := reflect.ValueOf(c).Elem()
	for p, part := range checkpointSplit {
		s := reflect.New(part.typ).Elem()
		for j, i := range part.fields {
			s.Field(j).Set(v.Field(i))
		}
		enc[p] = partEncoders.Get().(*encoder)
		b, err := enc[p].scratch(s.Addr().Interface())
		if err != nil {
			return nil, err
		}
		parts[p] = b
	}
	before, after := parts[0], parts[1]
	out := make([]byte, 0, len(before)+len(hist)+len(after)+len(`,"history":`))
	out = append(out, before[:len(before)-1]...) // without its closing brace
	if hist != nil {
		out = append(out, `,"history":`...)
		out = append(out, hist...)
	}
	if len(after) > 2 {
		out = append(out, ',')
		out = append(out, after[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}
