package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The envelope members only a session's runtime sets (parentSessionId,
// handle, depth) are refused from every channel body with 400, the message
// naming the member; nothing is written.
func TestRuntimeOnlyFieldsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-rt", "v1", 1, 1, nil)
	if err := e.ing.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := e.durable()
	for _, field := range []string{"parentSessionId", "handle", "depth"} {
		value := `"p1"`
		if field == "depth" {
			value = `1`
		}
		for _, req := range [][2]string{
			{"/v1/sessions", `{"text":"x","` + field + `":` + value + `}`},
			{"/v1/deliveries", `{"sessionId":"sess-rt","text":"x","` + field + `":` + value + `}`},
			{"/v1/sessions/sess-rt/cancel", `{"` + field + `":` + value + `}`},
			{"/v1/sessions/sess-rt/input", `{"requestId":"r1","value":1,"` + field + `":` + value + `}`},
			{"/v1/sessions/sess-rt/authorize", `{"attemptId":"a1","result":"granted","` + field + `":` + value + `}`},
		} {
			wantError(t, e, req[0], req[1], http.StatusBadRequest, "bad_request", field)
		}
		microError(t, e, "deliver", `{"sessionId":"sess-rt","text":"x","`+field+`":`+value+`}`, "400", "bad_request")
		microError(t, e, "input", `{"sessionId":"sess-rt","requestId":"r1","value":1,"`+field+`":`+value+`}`, "400", "bad_request")
	}
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused request wrote: %v -> %v", before, after)
	}
}

// The runtime-internal kinds a child sends its parent (child.result,
// child.waiting, child.resumed) have routes that answer 400
// runtime_only_command, over HTTP with any method and over NATS; nothing
// is written. (The kind end, a parent's close of its child, has no route:
// the route named end is the user's end, a terminate command.)
func TestRuntimeOnlyCommandsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-end", "v1", 1, 1, nil)
	if err := e.ing.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := e.durable()
	for _, kind := range []string{"child.result", "child.waiting", "child.resumed"} {
		wantError(t, e, "/v1/sessions/sess-end/"+kind, ``, http.StatusBadRequest, "runtime_only_command", "runtime-internal")
		wantError(t, e, "/v1/sessions/sess-end/"+kind, `{"caller":"c"}`, http.StatusBadRequest, "runtime_only_command", kind)
		checkError(t, e, http.MethodGet, "/v1/sessions/sess-end/"+kind, ``, testToken, http.StatusBadRequest, "runtime_only_command")
		microError(t, e, kind, `{"sessionId":"sess-end"}`, "400", "runtime_only_command")
	}
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused request wrote: %v -> %v", before, after)
	}
}

// wantError posts body to path and checks the refusal's status, code and
// that its message contains word.
func wantError(t *testing.T, e *env, path, body string, status int, code, word string) {
	t.Helper()
	got, b := e.post(path, body)
	var eb struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(b, &eb); err != nil || got != status || eb.Error.Code != code || !strings.Contains(eb.Error.Message, word) {
		t.Fatalf("POST %s %s = %d %s, want %d %s naming %q", path, body, got, b, status, code, word)
	}
}
