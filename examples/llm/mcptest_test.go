package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-rt/baton/internal/proctest"
)

// The tests' MCP server, built from the SDK: echo {"text"} returns the
// text ("fail" fails the tool: isError), add {"a","b"} returns {"sum"}.
// Each call is counted: in memory (calls), or, as a process of its own
// (the test binary run as mcpServerArg <dir>), as a line of <dir>/calls;
// that process appends its PID to <dir>/pids once it serves, and while
// <dir>/hold exists it exits at once with status 1 (a server that cannot
// be restarted).

// mcpServerArg, as the first argument, makes the test binary the MCP
// server over its stdin and stdout (TestMain).
const mcpServerArg = "baton-llm-test-mcp-server"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == mcpServerArg {
		os.Exit(serveStdio(os.Args[2]))
	}
	os.Exit(proctest.Main(m))
}

// serveStdio is the MCP server process of dir: its exit code.
func serveStdio(dir string) int {
	if _, err := os.Stat(filepath.Join(dir, "hold")); err == nil {
		fmt.Fprintln(os.Stderr, "mcp test server: held")
		return 1
	}
	if err := appendLine(filepath.Join(dir, "pids"), strconv.Itoa(os.Getpid())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := newMCPServer(func(tool string) { _ = appendLine(filepath.Join(dir, "calls"), tool) })
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, "mcp test server:", err)
	}
	return 0
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

// newMCPServer is the test server; count is called with each call's tool.
func newMCPServer(count func(tool string)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "baton-test", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: `Returns the text; "fail" fails.`},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			count("echo " + in.Text)
			if in.Text == "fail" {
				return nil, nil, errors.New("echo: asked to fail")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds a and b."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			count("add")
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	return s
}

// calls counts an in-memory server's calls.
type calls struct {
	mu  sync.Mutex
	all []string
}

func (c *calls) count(tool string) {
	c.mu.Lock()
	c.all = append(c.all, tool)
	c.mu.Unlock()
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all...)
}

// memorySource is srv as an MCP server of the agent, over in-memory
// transports: each connection a new pair, the server's end connected.
func memorySource(t *testing.T, name string, srv *mcp.Server) mcpSource {
	return mcpSource{name: name, dial: func() mcp.Transport {
		client, server := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), server, nil); err != nil {
			t.Errorf("%s: server connect: %v", name, err)
		}
		return client
	}}
}

// stdioServer is the test binary as an MCP server process of a new
// directory: the --mcp-command value (quoted, as a shell would want it)
// and the directory. Every server process of it still running is killed
// when the test ends.
func stdioServer(t *testing.T) (string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { // a server whose owner was killed has exited, or is about to
		for _, pid := range lines(t, filepath.Join(dir, "pids")) {
			cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
			n, _ := strconv.Atoi(pid)
			if err == nil && strings.Contains(string(cmdline), dir) { // not a process that took a PID since
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return fmt.Sprintf("'%s' %s \"%s\"", exe, mcpServerArg, dir), dir
}

// lines are the lines of the file at path (none if there is no file).
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// eventually polls cond every 10ms until it holds, failing the test after
// wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
