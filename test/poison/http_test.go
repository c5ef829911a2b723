package poison_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// Whatever the ingress accepts, the runtime can store: deliveries from 1 B
// to the body limit − 1 KiB are accepted, applied and echoed in full by the
// demo agent, readable through ?follow=false and SSE; the next small
// delivery is answered; the record stays under the KV limit; one byte over
// the body limit is a 413 that writes nothing.
func TestEverythingAcceptedIsStorable(t *testing.T) {
	e := newEnv(t)
	e.owner("p1", &demo.Agent{})
	id := e.create()
	envelope := len(fmt.Sprintf(`{"sessionId":%q,"text":""}`, id))
	sizes := []int{1, 16<<10 - 1, 16 << 10, 16<<10 + 1, 17 << 10, 128<<10 - 1, 128 << 10, 128<<10 + 1, 300 << 10,
		ingress.DefaultMaxBodyBytes - 1<<10 - envelope}
	texts := make([]string, len(sizes))
	for i, n := range sizes {
		texts[i] = text(n)
		if code, _ := e.deliver(id, texts[i]); code != http.StatusAccepted {
			t.Fatalf("%d bytes: %d, want 202", n, code)
		}
	}
	e.deliver(id, "small after")
	evs := e.waitEvents(id, "every delivery echoed", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCompleted) == len(sizes)+1
	})
	checkStream(t, evs)
	if errs := errorsOf(evs); len(errs) > 0 {
		t.Fatalf("steps failed: %+v", errs)
	}
	got := outputsOf(t, evs)
	if len(got) != len(sizes)+1 || got[len(sizes)] != "small after" {
		t.Fatalf("%d outputs", len(got))
	}
	for i, n := range sizes {
		if got[i] != texts[i] {
			t.Fatalf("the %d-byte text came back as %d bytes", n, len(got[i]))
		}
	}
	sse := e.sse(id, wire.EventTurnCompleted, len(sizes)+1)
	i := 0
	for _, ev := range sse {
		if ev.Event != wire.EventMessageOutput {
			continue
		}
		var env wire.Event
		if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
			t.Fatal(err)
		}
		if txt := outputText(t, env); i < len(sizes) && txt != texts[i] {
			t.Fatalf("SSE: the %d-byte text came back as %d bytes", sizes[i], len(txt))
		}
		i++
	}
	if i != len(sizes)+1 {
		t.Fatalf("SSE carried %d outputs", i)
	}
	if b, _ := json.Marshal(e.record(id).Record); len(b) > wire.MaxRecordBytes {
		t.Fatalf("record is %d bytes", len(b))
	}
	over := `{"sessionId":"` + id + `","text":"` + strings.Repeat("x", ingress.DefaultMaxBodyBytes) + `"}`
	before := len(e.events(id))
	if code, body := e.call("POST", "/v1/deliveries", over[:ingress.DefaultMaxBodyBytes+1]); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body limit + 1: %d %s, want 413", code, body)
	}
	if after := len(e.events(id)); after != before {
		t.Fatalf("a refused body changed the session: %d events, then %d", before, after)
	}
}

// outputsOf returns the message.output texts as the ingress serves them.
func outputsOf(t *testing.T, evs []wire.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Kind == wire.EventMessageOutput {
			out = append(out, outputText(t, ev))
		}
	}
	return out
}
