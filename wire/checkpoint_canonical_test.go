package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"
)

// TestCanonicalDecodeOfWhatTheEncoderWrites: whatever EncodeCheckpoint
// writes, DecodeCheckpoint reads without the schema (decodeCanonical
// accepts it), to the value the schema path decodes.
func TestCanonicalDecodeOfWhatTheEncoderWrites(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b, err := EncodeCheckpoint(genValidCheckpoint(rt))
		if err != nil {
			rt.Fatalf("the encoder refused a valid checkpoint: %v", err)
		}
		fast, ok := decodeCanonical(b)
		if !ok {
			rt.Fatalf("decodeCanonical declined the encoder's own bytes:\n%s", b)
		}
		assertSchemaPath(rt, b, fast)
	})
	for _, c := range []Checkpoint{fullCheckpoint(), longCheckpoint(), fullCheckpointV5(), fullCheckpointV9()} {
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := decodeCanonical(b)
		if !ok {
			t.Fatalf("decodeCanonical declined the encoder's own bytes:\n%s", b)
		}
		assertSchemaPath(t, b, fast)
	}
}

// genValidCheckpoint is one of the full checkpoints of each state version
// with drawn texts (any Unicode, escapes included), history and numbers.
func genValidCheckpoint(rt *rapid.T) Checkpoint {
	bases := []func() Checkpoint{fullCheckpoint, fullCheckpointV3, fullCheckpointV5, fullCheckpointV6,
		fullCheckpointV7, fullCheckpointV8, fullCheckpointV9, longCheckpoint}
	c := bases[rapid.IntRange(0, len(bases)-1).Draw(rt, "base")]()
	c.History = slices.Clone(c.History)
	for i := range rapid.IntRange(0, 8).Draw(rt, "entries") {
		role := rapid.SampledFrom([]string{RoleUser, "agent", "assistant"}).Draw(rt, "role")
		c.History = append(c.History, HistoryEntry{Role: role, Text: rapid.String().Draw(rt, fmt.Sprint("text", i))})
	}
	c.Compaction.Count = rapid.Uint64Range(0, 1<<40).Draw(rt, "compactions")
	if c.Turn.Live && len(c.Turn.Inputs) > 0 {
		c.Turn.Inputs = slices.Clone(c.Turn.Inputs)
		if in := &c.Turn.Inputs[0]; in.Text != "" {
			in.Text = rapid.StringN(1, 64, -1).Draw(rt, "input")
		}
	}
	return c
}

// TestCanonicalDecodeAgreement holds decodeCanonical to the schema path on
// inputs that keep the encoder's layout: the canonical encoding of every
// state version's fixture with one member's value replaced or the member
// removed, written in the same member order without spaces. Many such
// inputs are canonical encodings of other values (a string for another
// string); every one decodeCanonical accepts must pass the schema and the
// Go rules and decode to the same value. Every corpusStride-th input is
// checked, as in the other agreement tests.
func TestCanonicalDecodeAgreement(t *testing.T) {
	accepted, declined := 0, 0
	for v := MinStateVersion; v <= CurrentStateVersion; v++ {
		raw, err := os.ReadFile(fmt.Sprintf("testdata/checkpoint/state_v%d.json", v))
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeRules(v, raw)
		if err != nil {
			t.Fatal(err)
		}
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range layoutMutations(t, b) {
			if !checked(i) {
				continue
			}
			fast, ok := decodeCanonical(m)
			if !ok {
				declined++
				continue
			}
			accepted++
			if ref := checkpointReference(m); ref != nil {
				t.Errorf("decodeCanonical accepted what the schema path refuses (%v):\n%s", ref, m)
				continue
			}
			assertSchemaPath(t, m, fast)
		}
	}
	t.Logf("%d mutated inputs accepted by decodeCanonical, %d declined", accepted, declined)
	if accepted < 100 || declined < 100 {
		t.Fatalf("the mutations exercise too little: %d accepted, %d declined", accepted, declined)
	}
}

// TestDecodeCheckpointDeclinesOtherLayouts: the same checkpoint indented,
// or with its members in another order, is read through the schema path
// to the same value.
func TestDecodeCheckpointDeclinesOtherLayouts(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV9())
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	root, err := parseOrdered(b)
	if err != nil {
		t.Fatal(err)
	}
	root.kids = append(root.kids[1:], root.kids[0]) // stateV last
	reordered := root.encode()
	want, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range [][]byte{indented.Bytes(), reordered} {
		if _, ok := decodeCanonical(other); ok {
			t.Fatalf("decodeCanonical accepted a layout the encoder does not write:\n%s", other)
		}
		got, err := DecodeCheckpoint(other)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("another layout decoded differently:\n got %+v\nwant %+v", got, want)
		}
	}
}

// assertSchemaPath: b passes the schema, and the schema path decodes it
// to fast.
func assertSchemaPath(t interface{ Fatalf(string, ...any) }, b []byte, fast Checkpoint) {
	v, err := peekStateVersion(b)
	if err != nil {
		t.Fatalf("state version: %v", err)
	}
	if err := debugCheck(checkpointContract(v), b); err != nil {
		t.Fatalf("decodeCanonical accepted what the schema refuses: %v\n%s", err, b)
	}
	ref, err := decodeRules(v, b)
	if err != nil {
		t.Fatalf("decodeCanonical accepted what the Go rules refuse: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("decodeCanonical's value differs from the schema path's:\n fast %+v\n  ref %+v", fast, ref)
	}
}

// layoutMutations are b (compact, in its member order) with one value
// replaced by each of a set of values, or its member removed, written back
// compact in the same order.
func layoutMutations(t *testing.T, b []byte) [][]byte {
	root, err := parseOrdered(b)
	if err != nil {
		t.Fatal(err)
	}
	replacements := []string{`null`, `""`, `"x"`, `"user"`, `"agent"`, `"deliver"`, `"queue"`, `"debounce"`,
		`"text"`, `"done"`, `"active"`, `"2026-01-01T00:00:00Z"`, `"sha256:00"`, `"a b"`,
		`0`, `1`, `-1`, `2`, `250`, `1.5`, `true`, `false`, `[]`, `["x"]`, `{}`, `{"a":1}`}
	var out [][]byte
	var walk func(n *node)
	walk = func(n *node) {
		for i := range n.kids {
			k := &n.kids[i]
			saved := *k
			for _, r := range replacements {
				*k = member{name: saved.name, val: &node{raw: r}}
				out = append(out, root.encode())
			}
			if n.object {
				n.kids = append(n.kids[:i:i], n.kids[i+1:]...)
				out = append(out, root.encode())
				n.kids = append(n.kids[:i:i], append([]member{saved}, n.kids[i:]...)...)
			}
			*k = saved
			walk(k.val)
		}
	}
	walk(root)
	return out
}

// node is a JSON value with its object members in document order: raw
// for a scalar, kids for an object or an array.
type node struct {
	raw    string
	object bool
	array  bool
	kids   []member
}

type member struct {
	name string // an object member's name, encoded; "" in an array
	val  *node
}

func parseOrdered(b []byte) (*node, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	return readNode(dec)
}

func readNode(dec *jsontext.Decoder) (*node, error) {
	switch dec.PeekKind() {
	case '{', '[':
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		n := &node{object: tok.Kind() == '{', array: tok.Kind() == '['}
		for dec.PeekKind() != '}' && dec.PeekKind() != ']' {
			var name string
			if n.object {
				nt, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				enc, _ := json.Marshal(nt.String())
				name = string(enc)
			}
			kid, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, member{name: name, val: kid})
		}
		_, err = dec.ReadToken()
		return n, err
	}
	v, err := dec.ReadValue()
	return &node{raw: string(v)}, err
}

func (n *node) encode() []byte {
	var buf bytes.Buffer
	n.write(&buf)
	return buf.Bytes()
}

func (n *node) write(buf *bytes.Buffer) {
	if !n.object && !n.array {
		buf.WriteString(n.raw)
		return
	}
	open, end := byte('['), byte(']')
	if n.object {
		open, end = '{', '}'
	}
	buf.WriteByte(open)
	for i, k := range n.kids {
		if i > 0 {
			buf.WriteByte(',')
		}
		if n.object {
			buf.WriteString(k.name)
			buf.WriteByte(':')
		}
		k.val.write(buf)
	}
	buf.WriteByte(end)
}
