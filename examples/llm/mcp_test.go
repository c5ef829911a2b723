package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP server's tools (over in-memory transports) are listed when the
// agent starts and offered after the built-in ones, with their
// descriptions and input schemas; the model's calls of them run on the
// server (counted there), and each result is a tool entry: the text, the
// server's isError kept, a structured result as its JSON text.
func TestMCPTools(t *testing.T) {
	f, srv := newFake(t), &calls{}
	a := newAgent(t, f, newTimer(), func(c *Config) {
		c.mcpExtra = []mcpSource{memorySource(t, "memory", newMCPServer(srv.count))}
	})
	t.Cleanup(a.Close)
	f.push(stream(callStart(0, "c1", "echo", `{"text": "hi"}`), callStart(1, "c2", "echo", `{"text": "fail"}`),
		callStart(2, "c3", "add", `{"a": 2, "b": 3}`), callStart(3, "c4", "add", `[1]`), stop("tool_calls")))
	r := step(t, a, nil, input(1, "", userText("echo hi, fail, add 2 and 3")))
	want := []runtime.Entry{runtime.ToolResult("c1", "hi", false), runtime.ToolResult("c2", "echo: asked to fail", true),
		runtime.ToolResult("c3", `{"sum":5}`, false), runtime.ToolResult("c4", `llm: invalid tool arguments: want a JSON object, got [1]`, true)}
	if r.Outcome != runtime.OutcomeContinue || !reflect.DeepEqual(r.History[1:], want) {
		t.Fatalf("step: %s %+v, want the results %+v", r.Outcome, r.History[1:], want)
	}
	if got := srv.list(); !slices.Equal(got, []string{"echo hi", "echo fail", "add"}) {
		t.Fatalf("the server's calls %q, want echo twice and add once (not the call with bad arguments)", got)
	}
	req := f.request(1)
	if got := toolNames(req); !slices.Equal(got, []string{"calculator", "remember", "recall", "add", "echo"}) {
		t.Fatalf("tools %v, want the built-ins, then the server's", got)
	}
	echo := req["tools"].([]any)[4].(map[string]any)["function"].(map[string]any)
	props, _ := echo["parameters"].(map[string]any)["properties"].(map[string]any)
	if echo["description"] != `Returns the text; "fail" fails.` || props["text"] == nil {
		t.Fatalf("echo's definition %v: want the server's description and input schema", echo)
	}
}

// A tool name that is taken — by a built-in tool, a tool of Config.Tools
// or another server's — is refused when the agent starts, with an error
// naming the server and the tool; so are a command line that does not
// split, a URL that is not HTTP and a server that cannot be started.
func TestMCPStartRefused(t *testing.T) {
	calc := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "v1"}, nil)
	mcp.AddTool(calc, &mcp.Tool{Name: "calculator"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	count := func(string) {}
	own := Tool{Name: "add", Run: func(context.Context, string, json.RawMessage) (string, bool, error) { return "", false, nil }}
	for _, tc := range []struct {
		want   string
		change func(*Config)
	}{
		{`memory: its tool "calculator" clashes with a built-in tool of that name`, func(c *Config) {
			c.mcpExtra = []mcpSource{memorySource(t, "memory", calc)}
		}},
		{`second: its tool "add" clashes with the tool of first of that name`, func(c *Config) {
			c.mcpExtra = []mcpSource{memorySource(t, "first", newMCPServer(count)), memorySource(t, "second", newMCPServer(count))}
		}},
		{`memory: its tool "add" clashes with a tool of Config.Tools of that name`, func(c *Config) {
			c.Tools, c.mcpExtra = []Tool{own}, []mcpSource{memorySource(t, "memory", newMCPServer(count))}
		}},
		{`dotted: its tool "fs.read" is not a Chat Completions function name`, func(c *Config) {
			dotted := mcp.NewServer(&mcp.Implementation{Name: "dotted", Version: "v1"}, nil)
			mcp.AddTool(dotted, &mcp.Tool{Name: "fs.read"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
			c.mcpExtra = []mcpSource{memorySource(t, "dotted", dotted)}
		}},
		{`--mcp-command "srv 'x": an unclosed ' quote`, func(c *Config) { c.MCPCommands = []string{"srv 'x"} }},
		{`--mcp-command "  ": want a command`, func(c *Config) { c.MCPCommands = []string{"  "} }},
		{`--mcp-url "ftp://x": want an http:// or https:// URL`, func(c *Config) { c.MCPURLs = []string{"ftp://x"} }},
		{`--mcp-command "/nonexistent/server --x": cannot connect`, func(c *Config) { c.MCPCommands = []string{"/nonexistent/server --x"} }},
	} {
		cfg := DefaultConfig()
		tc.change(&cfg)
		a, err := New(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want ErrConfig with %q", err, tc.want)
		}
		if a != nil {
			a.Close()
		}
	}
}

// Command lines split like a shell's words, without expansion.
func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`srv`:                          {"srv"},
		`  python3  -m  srv  `:         {"python3", "-m", "srv"},
		`'/my dir/srv' --name "a b"`:   {"/my dir/srv", "--name", "a b"},
		`srv a\ b "q\"uote" 'it\'s'`:   nil, // the last quote is open
		`srv a\ b "q\"uote\\" '$HOME'`: {"srv", "a b", `q"uote\`, "$HOME"},
		`srv "" 'x'"y" \'`:             {"srv", "", "xy", "'"},
		`srv "a\nb"`:                   {"srv", `a\nb`},
	} {
		got, err := splitCommand(in)
		if want == nil {
			if err == nil {
				t.Errorf("%s: %q, want an error", in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
}

// --mcp-url: a streamable HTTP server (the SDK's handler) has its tools
// listed and called; while it answers 503 a call is an error result for
// the model (ErrMCPUnavailable), and once it is back the supervisor has
// reconnected and a call works again.
func TestMCPURL(t *testing.T) {
	srv := &calls{}
	var down atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer(srv.count) }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f := newFake(t)
	a := newAgent(t, f, newTimer(), func(c *Config) {
		c.MCPURLs, c.mcpRestart = []string{ts.URL}, restartPolicy{first: 10 * time.Millisecond, max: 50 * time.Millisecond}
	})
	t.Cleanup(a.Close)
	call := func(n int, id, args string) runtime.Entry {
		t.Helper()
		f.push(stream(callStart(0, id, "add", args), stop("tool_calls")))
		return step(t, a, nil, input(n, "", userText("add"))).History[1]
	}
	if got := call(1, "c1", `{"a": 2, "b": 3}`); !reflect.DeepEqual(got, runtime.ToolResult("c1", `{"sum":5}`, false)) {
		t.Fatalf("the call's result %+v", got)
	}
	if got := toolNames(f.request(1)); !slices.Equal(got, []string{"calculator", "remember", "recall", "add", "echo"}) {
		t.Fatalf("tools %v", got)
	}
	down.Store(true)
	got := call(2, "c2", `{"a": 1, "b": 1}`)
	if !got.IsError || !strings.HasPrefix(got.Text(), ErrMCPUnavailable.Error()+": --mcp-url "+ts.URL) {
		t.Fatalf("a call while the server is down: %+v, want an error result naming it", got)
	}
	down.Store(false)
	eventually(t, "the supervisor reconnected", a.mcp.servers[0].up)
	if got := call(3, "c3", `{"a": 4, "b": 4}`); !reflect.DeepEqual(got, runtime.ToolResult("c3", `{"sum":8}`, false)) {
		t.Fatalf("a call after the reconnect: %+v", got)
	}
	if got := srv.list(); !slices.Equal(got, []string{"add", "add"}) {
		t.Fatalf("the server's calls %q, want the two that reached it", got)
	}
}
