package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP servers' tools (--mcp-command, --mcp-url): every server is connected
// and its tools listed when the agent is configured, so a server that
// cannot be reached, or a tool whose name is taken, fails the start. Each
// tool is a Tool like a program's own (Config.Tools): its calls go through
// the step's journal, and whatever becomes of a call — the server's
// result, its error, a server that is down — is a result for the model,
// recorded as the call's outcome (see mcpTool).

// mcpSource is one configured MCP server: its name in messages (the flag
// and its value) and how to reach it; each connection, the first and every
// one after a failure, dials a new transport (a command transport starts
// a new process).
type mcpSource struct {
	name string
	dial func() mcp.Transport
}

// mcpSources are the servers of cfg: the commands, the URLs, then the
// tests' own.
func mcpSources(cfg Config) ([]mcpSource, error) {
	var out []mcpSource
	for _, c := range cfg.MCPCommands {
		argv, err := splitCommand(c)
		if err != nil {
			return nil, fmt.Errorf("--mcp-command %q: %w", c, err)
		}
		out = append(out, mcpSource{name: fmt.Sprintf("--mcp-command %q", c), dial: commandDial(argv)})
	}
	for _, u := range cfg.MCPURLs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("--mcp-url %q: want an http:// or https:// URL", u)
		}
		out = append(out, mcpSource{name: "--mcp-url " + u, dial: func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: u, DisableStandaloneSSE: true}
		}})
	}
	return append(out, cfg.mcpExtra...), nil
}

// commandDial starts argv as a new process each time, speaking MCP over
// its stdin and stdout; its stderr is the owner's.
func commandDial(argv []string) func() mcp.Transport {
	return func() mcp.Transport {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = os.Stderr
		return &mcp.CommandTransport{Command: cmd}
	}
}

// splitCommand splits a command line into words as a POSIX shell does,
// without expanding anything: words are separated by blanks, 'single
// quotes' keep everything up to the next one, "double quotes" keep
// everything but a backslash before " or \, and a backslash outside
// quotes keeps the next character.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quote := false, rune(0)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'' && r != '\'', quote == '"' && r != '"' && r != '\\':
			w.WriteRune(r)
		case quote != 0 && r == quote:
			quote = 0
		case r == '\\' && i+1 < len(rs) && (quote == 0 || rs[i+1] == '"' || rs[i+1] == '\\'):
			i++
			w.WriteRune(rs[i])
			inWord = true
		case quote == 0 && (r == '\'' || r == '"'):
			quote, inWord = r, true
		case quote == 0 && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case quote != 0:
		return nil, fmt.Errorf("an unclosed %c quote", quote)
	case inWord:
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, errors.New("want a command")
	}
	return words, nil
}

// mcpSet is the agent's MCP servers and their tools.
type mcpSet struct {
	servers []*mcpServer
	tools   []Tool
}

// startMCP connects every server of cfg, lists its tools and makes each
// a Tool; taken names (builtin, Config.Tools, an earlier server's) are
// refused. An error closes what was started.
// toolNamePattern is what Chat Completions accepts as a function name.
const toolNamePattern = `^[a-zA-Z0-9_-]{1,64}$`

var toolNameRE = regexp.MustCompile(toolNamePattern)

func startMCP(cfg Config, log *slog.Logger) (*mcpSet, error) {
	srcs, err := mcpSources(cfg)
	if err != nil || len(srcs) == 0 {
		return nil, err
	}
	taken := map[string]string{ToolCalculator: "a built-in tool", ToolRemember: "a built-in tool", ToolRecall: "a built-in tool"}
	for _, t := range cfg.Tools {
		taken[t.Name] = "a tool of Config.Tools"
	}
	set := &mcpSet{}
	for _, src := range srcs {
		s, listed, err := startServer(src, cfg.mcpRestart, log)
		if err != nil {
			set.close()
			return nil, err
		}
		set.servers = append(set.servers, s)
		for _, t := range listed {
			if !toolNameRE.MatchString(t.Name) {
				set.close()
				return nil, fmt.Errorf("%s: its tool %q is not a Chat Completions function name (%s): every request offering it would be refused", src.name, t.Name, toolNamePattern)
			}
			if by, ok := taken[t.Name]; ok {
				set.close()
				return nil, fmt.Errorf("%s: its tool %q clashes with %s of that name (tool names must be unique)", src.name, t.Name, by)
			}
			taken[t.Name] = "the tool of " + src.name
			set.tools = append(set.tools, mcpTool(s, t))
		}
	}
	return set, nil
}

// toolList is the servers' tools (none for a nil set).
func (m *mcpSet) toolList() []Tool {
	if m == nil {
		return nil
	}
	return m.tools
}

// close stops every server's supervision and closes its session.
func (m *mcpSet) close() {
	if m == nil {
		return
	}
	for _, s := range m.servers {
		s.close()
	}
}

// mcpTool is the Tool of an MCP server's tool t: its name, description
// and input schema, and a Run that calls it (tools/call) on s. Run
// returns an error only when the step's context ended (nothing is
// journaled then); everything else is a result the journal records:
// the tool's content (isError as the server set it), a protocol error
// of the server (an unknown tool, bad arguments), or a call that did not
// reach the server or got no answer (it is down or restarting) — that
// outcome is recorded, not retried by a re-run, since a call whose answer
// was lost may well have run, and the model has read it either way.
func mcpTool(s *mcpServer, t *mcp.Tool) Tool {
	return Tool{
		Name: t.Name, Description: t.Description, Parameters: schema(t.InputSchema),
		Run: func(ctx context.Context, _ string, args json.RawMessage) (string, bool, error) {
			var obj map[string]json.RawMessage
			if json.Unmarshal(args, &obj) != nil {
				return fmt.Sprintf("%v: want a JSON object, got %s", ErrArguments, args), true, nil
			}
			r, err := s.call(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
			if ctx.Err() != nil {
				return "", false, ctx.Err()
			}
			if err != nil {
				return err.Error(), true, nil
			}
			return resultText(r), r.IsError, nil
		},
	}
}

// schema is an input schema as the model's tool parameters: the object
// the SDK decoded, an empty object schema if the server sent none.
func schema(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	var m map[string]any
	if b, err := json.Marshal(v); err == nil && json.Unmarshal(b, &m) == nil && m != nil {
		return m
	}
	return map[string]any{"type": "object"}
}

// resultText is a tools/call result as the text the model reads: its
// text contents joined by newlines, any other content named in brackets,
// the structured content's JSON when there is no content.
func resultText(r *mcp.CallToolResult) string {
	parts := make([]string, 0, len(r.Content))
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			parts = append(parts, embedded(c.Resource))
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

// embedded is an embedded resource's text, or its name in brackets.
func embedded(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Text != "":
		return r.Text
	}
	return fmt.Sprintf("[resource %s (%s), %d bytes]", r.URI, r.MIMEType, len(r.Blob))
}
