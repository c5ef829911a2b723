package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sessionTags are the tags of fullCheckpointV7.
func sessionTags() map[string]string {
	return map[string]string{"env": "prod", "note": "", "owner": "Zoë", "team.search": "retrieval-v2"}
}

// mailerCancel is a cancel a parent sends the child behind its handle
// "mailer" (a stored command beside the pending one).
func mailerCancel() Command {
	return Command{Kind: KindCancel, ID: "c10", AcceptedDeploymentID: "dep-1", AcceptedAt: time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC),
		ParentSessionID: "sess-1", Handle: "mailer", Depth: 2}
}

// fullCheckpointV7 is fullCheckpointV6 with the session's tags (state
// version 7) and a send beside the pending one.
func fullCheckpointV7() Checkpoint {
	c := fullCheckpointV6()
	c.Tags = sessionTags()
	c.Sends = []Send{{SessionID: "sess-3", Command: mailerCancel()}}
	return c
}

// TestCheckpointV7Fixture: the frozen version 7 fixture is
// fullCheckpointV7; it decodes to the same value, its stored commands
// written at inbox version 2.
func TestCheckpointV7Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV7())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v7.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.StateV != 7 || !SameTags(d.Tags, sessionTags()) {
		t.Fatalf("decoded %+v, %v", d.Tags, err)
	}
	if again, err := EncodeCheckpoint(d); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v", err)
	}
}

// State version 7 is written only when the session has tags: the same
// checkpoint without them is written at its lower version, byte for byte
// as the shipped code writes it (the frozen fixtures), so an owner of that
// version reads it after a rollback. With tags, a lower version's schema
// refuses it, and so does DecodeCheckpoint when it declares one.
func TestTagsLowestVersion(t *testing.T) {
	for _, tt := range []struct {
		name    string
		c       Checkpoint
		want    int
		fixture string // the shipped encoding without tags ("" for none)
	}{
		{"plain", fullCheckpoint(), 1, ""},
		{"agent API", fullCheckpointV3(), 3, "testdata/checkpoint/state_v3.json"},
		{"subagents", fullCheckpointV5(), 5, "testdata/checkpoint/state_v5.json"},
		{"pending send", fullCheckpointV6(), 6, "testdata/checkpoint/state_v6.json"},
	} {
		for _, empty := range []map[string]string{nil, {}} {
			c := tt.c
			c.Tags = empty
			b, err := EncodeCheckpoint(c)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if v, _ := ReadStateVersion(b); v != tt.want {
				t.Errorf("%s without tags: state version %d, want %d", tt.name, v, tt.want)
			}
			if want := bytes.TrimRight(readFileOrNil(t, tt.fixture), "\n"); tt.fixture != "" && !bytes.Equal(b, want) {
				t.Errorf("%s without tags is not what the shipped code writes:\n got %s\nwant %s", tt.name, b, want)
			}
		}
		c := tt.c
		c.Tags = map[string]string{"env": "prod"}
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatalf("%s with tags: %v", tt.name, err)
		}
		if v, _ := ReadStateVersion(b); v != 7 {
			t.Errorf("%s with tags: state version %d, want 7", tt.name, v)
		}
		if err := debugCheck(checkpointContract(7), b); err != nil {
			t.Errorf("%s with tags: the version-7 schema refuses it: %v", tt.name, err)
		}
		if err := debugCheck(checkpointContract(6), b); err == nil {
			t.Errorf("%s with tags matches version 6's frozen schema", tt.name)
		}
		declared := strings.Replace(string(b), `"stateV":7`, `"stateV":6`, 1)
		if _, err := DecodeCheckpoint([]byte(declared)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: tags declared at version 6: %v, want ErrInvalid", tt.name, err)
		}
		c.StateV = 6
		n := normalizeCheckpoint(c)
		n.StateV = 6
		if err := n.validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: the Go rules accept tags at version 6: %v", tt.name, err)
		}
	}
}

func readFileOrNil(t *testing.T, path string) []byte {
	if path == "" {
		return nil
	}
	return readFile(t, path)
}

// The tags a checkpoint holds are checked (ValidateTags), copied, and nil
// when empty.
func TestCheckpointTags(t *testing.T) {
	for name, tags := range map[string]map[string]string{
		"bad key":      {"Env": "prod"},
		"long value":   {"env": strings.Repeat("é", MaxTagValueBytes/2+1)},
		"not UTF-8":    {"env": "\xff"},
		"17 tags":      manyTags(MaxTags+1, "v"),
		"empty key":    {"": "v"},
		"key too long": {strings.Repeat("k", MaxTagKeyBytes+1): "v"},
	} {
		c := fullCheckpoint()
		c.Tags = tags
		_, err := EncodeCheckpoint(c)
		var se *StateError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &se) {
			t.Errorf("%s: err = %v, want ErrInvalid as *StateError", name, err)
		}
	}
	c := fullCheckpoint()
	c.Tags = sessionTags()
	b, err := EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Tags["env"] = "changed after encoding"
	d, err := DecodeCheckpoint(b)
	if err != nil || !SameTags(d.Tags, sessionTags()) {
		t.Fatalf("decoded %v, %v", d.Tags, err)
	}
	if n := normalizeCheckpoint(c); reflect.ValueOf(n.Tags).Pointer() == reflect.ValueOf(c.Tags).Pointer() {
		t.Error("normalizeCheckpoint shares the tags map")
	}
	if n := normalizeCheckpoint(Checkpoint{Tags: map[string]string{}}); n.Tags != nil {
		t.Error("empty tags are not nil")
	}
	// A version-7 checkpoint with an empty tags member is refused by its
	// schema: it is never written.
	empty := regexp.MustCompile(`"tags":\{[^}]*\}`).ReplaceAll(b, []byte(`"tags":{}`))
	if bytes.Equal(empty, b) {
		t.Fatal("no tags to empty")
	}
	if _, err := DecodeCheckpoint(empty); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty tags member: %v", err)
	}
}

// Commands stored in a checkpoint are written at StoredCommandVersion:
// the v5 and v6 fixtures re-encode byte for byte with their commands at
// "v":2 (in memory they are current commands), and a version-7 checkpoint
// writes its sends and pending sends at "v":2 too.
func TestStoredCommandsAtV2(t *testing.T) {
	const stored = `"command":{"v":2,`
	for _, v := range []int{5, 6, 7} {
		raw := bytes.TrimRight(readFile(t, fmt.Sprintf("testdata/checkpoint/state_v%d.json", v)), "\n")
		c, err := DecodeCheckpoint(raw)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		cmds := 0
		for _, s := range c.Sends {
			cmds++
			if s.Command.V != CurrentVersion {
				t.Errorf("v%d: a decoded send's command is at v%d, want %d", v, s.Command.V, CurrentVersion)
			}
		}
		for _, p := range c.PendingSends {
			cmds++
			if p.Send.Command.V != CurrentVersion {
				t.Errorf("v%d: a decoded pending send's command is at v%d, want %d", v, p.Send.Command.V, CurrentVersion)
			}
		}
		out, err := EncodeCheckpoint(c)
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("v%d: not byte-identical (%v):\n got %s\nwant %s", v, err, out, raw)
		}
		if n := bytes.Count(out, []byte(stored)); cmds == 0 || n != cmds || bytes.Contains(out, []byte(`"command":{"v":3`)) {
			t.Errorf("v%d: %d commands, %d written at v2", v, cmds, n)
		}
	}
	// What the checkpoint's schema says of them: v is 2, in the generated
	// current schema as in the frozen ones (the inbox schema says 3).
	b, _ := EncodeCheckpoint(fullCheckpointV7())
	for _, v := range []string{"1", "3", "4"} {
		other := bytes.ReplaceAll(b, []byte(stored), []byte(`"command":{"v":`+v+`,`))
		if _, err := DecodeCheckpoint(other); !errors.Is(err, ErrInvalid) {
			t.Errorf("stored commands at v%s: %v, want ErrInvalid", v, err)
		}
	}
	var schema struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(CheckpointSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if got := string(schema.Defs["Command"].Properties["v"]); !strings.Contains(got, `"const": 2`) {
		t.Errorf("stored command v in the checkpoint schema: %s, want const 2", got)
	}
}

// The stored commands of a checkpoint of the current state version have
// exactly the shape of version 6's (inbox version 2): a tag, terminate or
// configure command is never stored, and a stored delivery has version
// 2's modes and no debounceMs.
func TestStoredCommandShapeIsV6(t *testing.T) {
	defs := func(raw []byte) map[string]any {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return doc["$defs"].(map[string]any)
	}
	v6, v7 := defs(readFile(t, "testdata/schema_checkpoint_v6.json")), defs(CheckpointSchema())
	// A send gains only the new child's tags.
	send := v7["Send"].(map[string]any)
	props := maps.Clone(send["properties"].(map[string]any))
	if _, ok := props["tags"]; !ok {
		t.Error("state version 7's Send has no tags")
	}
	delete(props, "tags")
	send = maps.Clone(send)
	send["properties"] = props
	v7["Send"] = send
	for _, name := range []string{"Command", "Deliver", "Send", "PendingSend", "TurnInput"} {
		if !reflect.DeepEqual(v6[name], v7[name]) {
			t.Errorf("definition %s differs between state version 6 and the current one", name)
		}
	}
	for _, name := range []string{"Tag", "Terminate", "Configure"} {
		if _, ok := v7[name]; ok {
			t.Errorf("the checkpoint schema defines %s", name)
		}
	}
}

// A tag command is applied at once: a checkpoint never sends, stores or
// admits it into a turn.
func TestCheckpointRefusesTagCommands(t *testing.T) {
	tag := validTag()
	for name, change := range map[string]func(*Checkpoint){
		"send": func(c *Checkpoint) { c.Sends = []Send{{SessionID: "sess-2", Command: tag}} },
		"pending send": func(c *Checkpoint) {
			p := pendingSend()
			p.Send.Command = tag
			c.PendingSends = []PendingSend{p}
		},
		"tag body on a send": func(c *Checkpoint) {
			s := fullCheckpointV5().Sends[0]
			s.Command.Tag = tag.Tag
			c.Sends = []Send{s}
		},
		"turn input": func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Inputs: []TurnInput{tag.Input(50)}}
		},
		"turn input of kind tag": func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Inputs: []TurnInput{{Seq: 50, ID: "c", Kind: KindTag}}}
		},
	} {
		c := fullCheckpoint()
		change(&c)
		_, err := EncodeCheckpoint(c)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "applied at once") {
			t.Errorf("%s: err = %v, want ErrInvalid (a tag command is applied at once)", name, err)
		}
	}
	b, _ := EncodeCheckpoint(fullCheckpointV7())
	withTag := bytes.Replace(b, []byte(`"kind":"deliver","mode":"queue"`), []byte(`"kind":"deliver","mode":"queue","tag":{"remove":["a"]}`), 1)
	if bytes.Equal(withTag, b) {
		t.Fatal("no turn input to change")
	}
	if _, err := DecodeCheckpoint(withTag); !errors.Is(err, ErrInvalid) {
		t.Errorf("a stored turn input with a tag: %v, want ErrInvalid", err)
	}
}

// A child-creating send carries the new child's tags: state version 7 for
// the send and for a pending send; a send that creates nothing (no alias)
// carries none, and the tags obey the session's rules.
func TestSendTags(t *testing.T) {
	childTags := map[string]string{"tenant": "acme"}
	sends := fullCheckpointV5()
	sends.Sends[0].Tags = childTags
	pending := fullCheckpointV6()
	pending.PendingSends[0].Send.Tags = childTags
	for name, c := range map[string]Checkpoint{"send": sends, "pending send": pending} {
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v, _ := ReadStateVersion(b); v != 7 {
			t.Errorf("%s with the child's tags: state version %d, want 7", name, v)
		}
		d, err := DecodeCheckpoint(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := d.Sends
		if name == "pending send" {
			got = []Send{d.PendingSends[0].Send}
		}
		if !SameTags(got[0].Tags, childTags) {
			t.Errorf("%s: decoded tags %v", name, got[0].Tags)
		}
		if err := debugCheck(checkpointContract(7), b); err != nil {
			t.Errorf("%s: the version-7 schema refuses it: %v", name, err)
		}
		declared := strings.Replace(string(b), `"stateV":7`, `"stateV":6`, 1)
		if _, err := DecodeCheckpoint([]byte(declared)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: the child's tags declared at version 6: %v, want ErrInvalid", name, err)
		}
	}
	for name, change := range map[string]func(*Send){
		"no alias":   func(s *Send) { s.Alias, s.DeploymentID = "", "" },
		"bad key":    func(s *Send) { s.Tags = map[string]string{"Tenant": "x"} },
		"too many":   func(s *Send) { s.Tags = seventeenTags() },
		"long value": func(s *Send) { s.Tags = map[string]string{"k": strings.Repeat("v", MaxTagValueBytes+1)} },
	} {
		c := fullCheckpointV5()
		c.Sends[0].Tags = childTags
		change(&c.Sends[0])
		if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func seventeenTags() map[string]string {
	m := map[string]string{}
	for i := range MaxTags + 1 {
		m[fmt.Sprintf("k%02d", i)] = "v"
	}
	return m
}
