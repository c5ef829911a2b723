package owner

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Validate checks every setting Run would refuse, naming the flag of the
// first bad one; the error matches ErrInvalidConfig. A Config with
// NATSOnly set is checked for the embedded server's settings only.
func (c Config) Validate() error {
	if _, err := c.resolve(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// resolved is a checked Config with what it selects: the names of its
// prefix and the process ID (defaulted).
type resolved struct {
	Config
	names subjects.Names
}

// resolve checks c and fills in the derived settings. Its errors name the
// flag, without ErrInvalidConfig: Main reports them as usage errors.
func (c Config) resolve() (resolved, error) {
	if c.NATSOnly {
		return resolved{Config: c}, checkHostPort("--nats-listen", c.NATSListen, -1, true)
	}
	if err := subjects.ValidateDeployment(c.DeploymentID); err != nil {
		return resolved{}, fmt.Errorf("--deployment-id: %w", err)
	}
	if c.AgentName == "" {
		c.AgentName = subjects.DefaultAgent
	}
	if err := subjects.ValidateAgent(c.AgentName); err != nil {
		return resolved{}, fmt.Errorf("--agent-name: %w", err)
	}
	names, err := subjects.New(c.Prefix)
	if err != nil {
		return resolved{}, fmt.Errorf("--prefix: %w", err)
	}
	if c.ProcessID == "" {
		c.ProcessID = defaultProcessID(c.DeploymentID)
	}
	if err := subjects.ValidateSessionID(c.ProcessID); err != nil {
		return resolved{}, fmt.Errorf("--process-id: %w", err)
	}
	if err := c.checkValues(); err != nil {
		return resolved{}, err
	}
	if err := c.checkLimits(); err != nil {
		return resolved{}, err
	}
	return resolved{Config: c, names: names}, c.checkAddrs()
}

// checkValues checks every value the pool would refuse, so a bad one is
// reported before anything starts.
func (c Config) checkValues() error {
	switch {
	case c.LeaseTTL < time.Second || c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("--lease-ttl %v: want whole seconds, at least 1s", c.LeaseTTL)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("--replicas %d: want 1 to 5", c.Replicas)
	case c.Replicas > 1 && c.NATSURL == "":
		return fmt.Errorf("--replicas %d needs a cluster (--nats-url); the embedded server is one node", c.Replicas)
	case c.StepTimeout <= 0:
		return fmt.Errorf("--step-timeout %v: want more than 0", c.StepTimeout)
	case c.ChildSendTimeout <= 0:
		return fmt.Errorf("--child-send-timeout %v: want more than 0", c.ChildSendTimeout)
	case c.TaskAckWait < time.Second:
		return fmt.Errorf("--task-ack-wait %v: want at least 1s", c.TaskAckWait)
	case c.SweepInterval < 0:
		return fmt.Errorf("--sweep-interval %v: want 0 or more", c.SweepInterval)
	case c.IndexReconcileInterval < 0:
		return fmt.Errorf("--index-reconcile-every %v: want 0 (off) or more", c.IndexReconcileInterval)
	case c.InboxSweepInterval <= 0 || c.InboxSweepInterval > 5*time.Second:
		return fmt.Errorf("--inbox-sweep-interval %v: want more than 0 and at most 5s (the bound on a lost wake)", c.InboxSweepInterval)
	case c.MaxDebounce < 250*time.Millisecond:
		return fmt.Errorf("--max-debounce %v: want at least 250ms", c.MaxDebounce)
	case c.RetainEnded < 0:
		return fmt.Errorf("--retain-ended %v: want 0 (keep forever) or more", c.RetainEnded)
	case c.EndIdleAfter < 0:
		return fmt.Errorf("--end-idle-after %v: want 0 (never) or more", c.EndIdleAfter)
	case c.MaxLoaded < 0:
		return fmt.Errorf("--max-loaded %d: want 0 (no cap) or more", c.MaxLoaded)
	case c.DrainTimeout < 0:
		return fmt.Errorf("--drain-timeout %v: want 0 or more", c.DrainTimeout)
	case c.QuarantineAfter < 1:
		return fmt.Errorf("--quarantine-after %d: want at least 1", c.QuarantineAfter)
	case slices.ContainsFunc(c.QuarantineBackoff, func(d time.Duration) bool { return d < 0 }):
		return fmt.Errorf("--quarantine-backoff %v: a negative wait", c.QuarantineBackoff)
	}
	return nil
}

// checkLimits checks the turn and session limits and the step retries.
func (c Config) checkLimits() error {
	switch {
	case c.StepRetries < 0:
		return fmt.Errorf("--step-retries %d: want 0 (never) or more", c.StepRetries)
	case slices.ContainsFunc(c.StepRetryBackoff, func(d time.Duration) bool { return d < 0 }):
		return fmt.Errorf("--step-retry-backoff %v: a negative wait", c.StepRetryBackoff)
	case c.MaxStepsPerTurn < 0:
		return fmt.Errorf("--max-steps-per-turn %d: want 0 (the default, %d) or more", c.MaxStepsPerTurn, DefaultConfig().MaxStepsPerTurn)
	case c.MaxTokensPerTurn < 0:
		return fmt.Errorf("--max-tokens-per-turn %d: want 0 (no limit) or more", c.MaxTokensPerTurn)
	case c.MaxTokensPerSession < 0:
		return fmt.Errorf("--max-tokens-per-session %d: want 0 (no limit) or more", c.MaxTokensPerSession)
	}
	return nil
}

// checkAddrs checks the listen addresses in use.
func (c Config) checkAddrs() error {
	if c.NATSURL == "" {
		if err := checkHostPort("--nats-listen", c.NATSListen, -1, true); err != nil {
			return err
		}
	}
	if c.MetricsListen != "" {
		return checkHostPort("--metrics-listen", c.MetricsListen, 0, false)
	}
	return nil
}

// checkHostPort checks a host:port listen address: the port from minPort
// (-1 or 0: the server picks a free one) to 65535, the host required when
// needHost.
func checkHostPort(flagName, addr string, minPort int, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < minPort || n > 65535) {
			err = fmt.Errorf("port %d out of range", n)
		}
	}
	if err == nil && needHost && host == "" {
		err = errors.New("give a host (127.0.0.1 to stay local)")
	}
	if err != nil {
		return fmt.Errorf("%s %q: want host:port (%v)", flagName, addr, err)
	}
	return nil
}

// defaultProcessID is <hostname>-<deployment>, with every character outside
// [A-Za-z0-9_-] replaced: stable across restarts of one process per host.
func defaultProcessID(deployment string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "owner"
	}
	b := []byte(host + "-" + deployment)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}
