package session

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// mapBlobs is a Blobs port over a map (package memory imports this one, so
// its internal tests cannot use it).
type mapBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *mapBlobs) Put(_ context.Context, name string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[name] = append([]byte(nil), data...)
	return nil
}

func (b *mapBlobs) Has(_ context.Context, name string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.m[name]
	return ok, nil
}

func (b *mapBlobs) Get(_ context.Context, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[name]
	if !ok {
		return nil, ErrBlobNotFound
	}
	return d, nil
}

func (b *mapBlobs) Delete(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, name)
	return nil
}

func blobEnv() *Env {
	e := &Env{Blobs: &mapBlobs{m: map[string][]byte{}}}
	e.segments, e.blobs = newSegmentCache(), newBlobStore(e.Blobs, nil)
	return e
}

const sid = "01M8S30JW19CHYNKBVJYJD7B2B"

// commitAndRead is what a commit writes and a successor reads back: the
// checkpoint of snap (history laid out into segments, long content out of
// line), encoded, then ReadCheckpoint.
func commitAndRead(t *testing.T, env *Env, snap runtime.Snapshot) (int, runtime.Snapshot) {
	t.Helper()
	ctx := context.Background()
	h := newHistory(env, "")
	segs, tail, err := h.layout(ctx, snap.History)
	if err != nil {
		t.Fatal(err)
	}
	full := snap.History
	snap.History = tail
	cp := toCheckpoint(sid, snap, nil, segs)
	if err := env.blobs.externalise(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	b, err := wire.EncodeCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := wire.ReadStateVersion(b)
	d, err := ReadCheckpoint(ctx, blobEnvLike(env), sid, b)
	if err != nil {
		t.Fatal(err)
	}
	snap.History = full
	return v, d.Snap
}

// blobEnvLike is a second owner on the same blobs, with a cold segment
// cache (a successor).
func blobEnvLike(env *Env) *Env {
	e := &Env{Blobs: env.Blobs}
	e.segments, e.blobs = newSegmentCache(), newBlobStore(e.Blobs, nil)
	return e
}

func payloadDelivery(seq uint64, ps []wire.Payload) runtime.Command {
	c := wire.Command{ID: "c" + strings.Repeat("x", int(seq%3)), Kind: wire.KindDeliver, AcceptedDeploymentID: "v1",
		Deliver: &wire.Deliver{Mode: wire.ModeSteer, Payloads: ps}}
	return c.Input(seq)
}

// Every payload an admitted delivery carries survives its checkpoint as
// sent — inline, out of line when long, and as plain text (state version
// 1) when it is one plain message.
func TestPayloadsSurviveTheCheckpoint(t *testing.T) {
	rich := []wire.Payload{{
		Message: &wire.Message{Parts: []wire.Part{{Type: wire.PartText, Text: "look"},
			{Type: wire.PartImage, URL: "https://example.com/a.png", MediaType: "image/png"},
			{Type: wire.PartFile, URL: "https://example.com/r.pdf", MediaType: "application/pdf", Name: "r.pdf"}}},
		Context: []string{"channel: #ops"}, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Ext: map[string]json.RawMessage{"slack": json.RawMessage(`{"ts":"1.2"}`)},
	}, {Message: wire.TextMessage("second")}}
	long := []wire.Payload{{Message: wire.TextMessage(strings.Repeat("long ", 4000)), Context: []string{"c"}}}
	for _, tt := range []struct {
		name     string
		payloads []wire.Payload
		wantV    int
	}{
		{"plain text", []wire.Payload{{Message: wire.TextMessage("hi")}}, 1},
		{"long plain text", []wire.Payload{{Message: wire.TextMessage(strings.Repeat("x", 9000))}}, 2},
		{"rich", rich, 3},
		{"rich and long", long, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := payloadDelivery(9, tt.payloads)
			snap := runtime.Snapshot{Started: true, Turns: 1, Turn: &runtime.Turn{ID: "t1", Open: true, Steps: 1, Inputs: []runtime.Command{in}}}
			v, got := commitAndRead(t, blobEnv(), snap)
			if v != tt.wantV {
				t.Errorf("written at state version %d, want %d", v, tt.wantV)
			}
			if g := got.Turn.Inputs[0]; !reflect.DeepEqual(g, in) {
				t.Fatalf("read back\n %+v\nwant\n %+v", g, in)
			}
		})
	}
}

// Structured history (tool calls, tool results, images) survives sealed
// segments and the inline tail; a history that fits the legacy shape is
// written at state version 1, so an older owner reads it.
func TestStructuredHistorySurvivesSegments(t *testing.T) {
	var legacy, structured []runtime.Entry
	for i := range 300 {
		text := strings.Repeat("a", 40) + string(rune('a'+i%26))
		legacy = append(legacy, runtime.Entry{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart(text)}},
			runtime.AssistantText(text))
		structured = append(structured, runtime.Entry{Role: runtime.RoleAssistant,
			ToolCalls: []runtime.ToolCall{{ID: "call", Name: "f", Arguments: json.RawMessage(`{"i":1}`)}}},
			runtime.ToolResult("call", text, i%2 == 0))
	}
	env := blobEnv()
	v, got := commitAndRead(t, env, runtime.Snapshot{History: legacy})
	if v != 1 || !reflect.DeepEqual(got.History, legacy) {
		t.Fatalf("legacy-shaped history: version %d, %d entries back (want 1, %d)", v, len(got.History), len(legacy))
	}
	v, got = commitAndRead(t, env, runtime.Snapshot{History: structured})
	if v != 3 || !reflect.DeepEqual(got.History, structured) {
		t.Fatalf("structured history: version %d, %d entries back (want 3, %d)", v, len(got.History), len(structured))
	}
}

// A checkpoint written before structured history (state version 2, its
// sealed segment in the {role, text} shape, frozen here) decodes and every
// entry kind migrates: user → user, agent → assistant, input → user
// input.response, auth → user auth.callback, task → user task.result,
// summary → system summary.
func TestLegacyHistoryMigrates(t *testing.T) {
	segment := []byte(`[{"role":"summary","text":"3 entries compacted"},{"role":"user","text":"hi"},{"role":"agent","text":"hello"},{"role":"input","text":"\"blue\""}]`)
	env := blobEnv()
	ref := wire.NewBlobRef(segment)
	if err := env.Blobs.Put(context.Background(), ref.Digest, segment); err != nil {
		t.Fatal(err)
	}
	cp := `{"stateV":2,"sessionId":"` + sid + `","historySegments":[{"digest":"` + ref.Digest + `","size":` +
		itoa(ref.Size) + `}],"history":[{"role":"auth","text":"granted"},{"role":"task","text":"t1-1-task: \"done\""}],` +
		`"stateRef":null,"eventSeq":9,"tokens":["` + sid + `"],"applied":{"low":5}}`
	cp = strings.Replace(cp, `"stateRef":null,`, "", 1)
	d, err := ReadCheckpoint(context.Background(), env, sid, []byte(cp))
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.Entry{
		{Role: runtime.RoleSystem, Kind: runtime.EntrySummary, Content: []runtime.Part{runtime.TextPart("3 entries compacted")}},
		{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart("hi")}},
		runtime.AssistantText("hello"),
		{Role: runtime.RoleUser, Kind: runtime.EntryInputResponse, Content: []runtime.Part{runtime.TextPart(`"blue"`)}},
		{Role: runtime.RoleUser, Kind: runtime.EntryAuthCallback, Content: []runtime.Part{runtime.TextPart("granted")}},
		{Role: runtime.RoleUser, Kind: runtime.EntryTaskResult, Content: []runtime.Part{runtime.TextPart(`t1-1-task: "done"`)}},
	}
	if !reflect.DeepEqual(d.Snap.History, want) {
		t.Fatalf("migrated history\n %+v\nwant\n %+v", d.Snap.History, want)
	}
	// Written again with nothing new, it is the legacy shape at version 1.
	v, _ := commitAndRead(t, env, d.Snap)
	if v != 1 {
		t.Fatalf("re-written at state version %d, want 1", v)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A segment an owner read once is decoded once: later reads through the
// same cache share its entries, and each read's history is its own — a
// session that rewrites an entry of its history changes no other
// session's, nor the cache's.
func TestCachedSegmentsAreSharedNotAliased(t *testing.T) {
	ctx := context.Background()
	var hist []runtime.Entry
	for i := range 400 {
		hist = append(hist, runtime.Entry{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart(strings.Repeat("x", 40) + string(rune('a'+i%26)))}})
	}
	writer := blobEnv()
	h := newHistory(writer, "")
	segs, tail, err := h.layout(ctx, hist)
	if err != nil || len(segs.refs) == 0 {
		t.Fatalf("layout: %d segments, %v", len(segs.refs), err)
	}
	reader := blobEnvLike(writer)
	first, err := newHistory(reader, "").load(ctx, segs, tail)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reader.segments.decoded(segs.refs[0]); !ok {
		t.Fatal("a segment read through the cache is not kept decoded")
	}
	first[0].Role, first[0].Content = runtime.RoleAssistant, nil // the first reader rewrites its copy
	second, err := newHistory(reader, "").load(ctx, segs, tail)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, hist) {
		t.Fatalf("a second read through the cache differs from the history written (entry 0: %+v)", second[0])
	}
}
