package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/openai/openai-go/v3/option"
)

// Config is the agent's configuration: the binary's own flags (Register)
// and what tests set besides.
type Config struct {
	// Model is the model every request names (--model).
	Model string
	// SystemPrompt, when not empty, is the first message of every request
	// (--system-prompt).
	SystemPrompt string
	// Retries is how often a model call that failed with 429, a 5xx or a
	// broken connection is retried within the step (--model-retries).
	Retries int
	// RetryMaxWait caps one wait between attempts, whether the backoff's
	// or a Retry-After header's (--model-retry-max-wait).
	RetryMaxWait time.Duration
	// RetryFirstWait is the backoff's first wait; each next one doubles it
	// (with jitter), up to RetryMaxWait.
	RetryFirstWait time.Duration
	// Options are the SDK's request options after those of the
	// environment (OPENAI_BASE_URL, OPENAI_API_KEY, …): tests point the
	// client at their fake this way. The SDK's own retries are always off.
	Options []option.RequestOption
	// Tools are tools of a program's own, offered next to the built-in
	// ones (a name may not repeat one): each call runs through the step's
	// journal (runtime.StepInput.Do).
	Tools []Tool
	// MCPCommands are MCP servers the agent runs, each a command line
	// (split into words like a shell does: blanks, quotes, backslashes; no
	// expansion) whose process speaks MCP over its stdin and stdout
	// (--mcp-command, repeatable). The agent restarts one that exits.
	MCPCommands []string
	// MCPURLs are MCP servers reached over streamable HTTP (--mcp-url,
	// repeatable).
	MCPURLs []string
	// Log is where the MCP servers' supervision logs (a server down,
	// reconnected); nil: nowhere.
	Log *slog.Logger

	timer      backoff.Timer // the wait between attempts (tests: one that records); nil: real time
	mcpExtra   []mcpSource   // tests: MCP servers of other transports (in memory), after the flags'
	mcpRestart restartPolicy // tests: shorter restart waits; zero: the defaults
}

// Defaults.
const (
	DefaultModel          = "gpt-4o-mini"
	DefaultRetries        = 4
	DefaultRetryMaxWait   = 30 * time.Second
	DefaultRetryFirstWait = 500 * time.Millisecond
)

// DefaultConfig is the configuration the flags default to.
func DefaultConfig() Config {
	return Config{Model: DefaultModel, Retries: DefaultRetries, RetryMaxWait: DefaultRetryMaxWait, RetryFirstWait: DefaultRetryFirstWait}
}

// Register adds the binary's flags to fs (owner.WithFlags' register).
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "the model of every Chat Completions request (OPENAI_BASE_URL and OPENAI_API_KEY from the environment name the server)")
	fs.StringVar(&c.SystemPrompt, "system-prompt", c.SystemPrompt, "the system message that opens every request (empty: none)")
	fs.IntVar(&c.Retries, "model-retries", c.Retries, "retries of a model call answered with 429 or a 5xx, or cut off before any output, within the step (then the step fails with model_unavailable; 0: none)")
	fs.DurationVar(&c.RetryMaxWait, "model-retry-max-wait", c.RetryMaxWait, "the longest wait before a retry, whether the exponential backoff's or the server's Retry-After")
	fs.Var(list{&c.MCPCommands}, "mcp-command", "an MCP server to run, as a command line (split like a shell: quotes, backslashes, no expansion) speaking MCP on stdin and stdout; its tools are offered to the model, and it is restarted when it exits (repeatable)")
	fs.Var(list{&c.MCPURLs}, "mcp-url", "the URL of an MCP server over streamable HTTP whose tools are offered to the model (repeatable)")
}

// list is a repeatable string flag: each use appends.
type list struct{ p *[]string }

func (l list) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, " ")
}

func (l list) Set(s string) error {
	*l.p = append(*l.p, s)
	return nil
}

// Validate checks every value, naming the flag of a bad one (an error
// matching ErrConfig).
func (c Config) Validate() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// check is Validate's check: the message as a usage error shows it.
func (c Config) check() error {
	switch {
	case c.Model == "":
		return errors.New("--model: want a model name")
	case c.Retries < 0 || c.Retries > 100:
		return fmt.Errorf("--model-retries %d: want 0 to 100", c.Retries)
	case c.RetryMaxWait <= 0:
		return fmt.Errorf("--model-retry-max-wait %s: want more than 0", c.RetryMaxWait)
	case c.RetryFirstWait <= 0:
		return fmt.Errorf("the first retry wait %s: want more than 0", c.RetryFirstWait)
	}
	seen := map[string]bool{ToolCalculator: true, ToolRemember: true, ToolRecall: true}
	for _, t := range c.Tools {
		if !toolNameRE.MatchString(t.Name) || t.Run == nil || seen[t.Name] {
			return fmt.Errorf("tool %q: want a new name (%s) and a Run function", t.Name, toolNamePattern)
		}
		seen[t.Name] = true
	}
	_, err := mcpSources(c)
	return err
}
