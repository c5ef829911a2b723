package app

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/baton-rt/baton/subjects"
)

// ErrUsage marks a command-line error; main exits with code 2 on it.
var ErrUsage = errors.New("usage")

// Common are the flags of every Baton binary.
type Common struct {
	DeploymentID string
	AgentName    string
	NATSURL      string
	Prefix       string
	LogLevel     string
	LogFormat    string
	Version      bool
}

// Register adds the common flags to fs; natsURL is the default --nats-url.
func (c *Common) Register(fs *flag.FlagSet, natsURL string) {
	fs.StringVar(&c.DeploymentID, "deployment-id", "", "exact deployment ID of this process: [A-Za-z0-9_-]{1,64}, never \"latest\" (required)")
	fs.StringVar(&c.AgentName, "agent-name", subjects.DefaultAgent, "the agent this deployment is a version of: [a-z0-9][a-z0-9_-]{0,63}; "+
		"its ingresses stamp its promoted deployment and serve baton.ingress.<agent>.*, and a session never moves to another agent's deployment "+
		"(not --agent, which chooses where steps run)")
	fs.StringVar(&c.NATSURL, "nats-url", natsURL, "NATS server URL(s), comma-separated")
	fs.StringVar(&c.Prefix, "prefix", subjects.DefaultPrefix, "name prefix of every stream, bucket and subject")
	fs.StringVar(&c.LogLevel, "log-level", envOr("LOG_LEVEL", "info"), "debug|info|warn|error (env LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", "", "text|json (default: text on a terminal, json otherwise)")
	fs.BoolVar(&c.Version, "version", false, "print the version (module version and VCS revision) and exit")
}

// Validate checks the common flags and returns the names they select.
func (c *Common) Validate() (subjects.Names, error) {
	if err := subjects.ValidateDeployment(c.DeploymentID); err != nil {
		return subjects.Names{}, fmt.Errorf("%w: --deployment-id: %w", ErrUsage, err)
	}
	if err := subjects.ValidateAgent(c.AgentName); err != nil {
		return subjects.Names{}, fmt.Errorf("%w: --agent-name: %w", ErrUsage, err)
	}
	names, err := subjects.New(c.Prefix)
	if err != nil {
		return subjects.Names{}, fmt.Errorf("%w: --prefix: %w", ErrUsage, err)
	}
	return names, c.ValidateLog()
}

// ValidateLog checks --log-level and --log-format.
func (c *Common) ValidateLog() error {
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	switch c.LogFormat {
	case "", "text", "json":
		return nil
	}
	return fmt.Errorf("%w: --log-format %q: want text or json", ErrUsage, c.LogFormat)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", ErrUsage, s)
	}
	return l, nil
}
