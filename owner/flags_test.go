package owner

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
)

func mustOptions(t *testing.T, opts ...Option) options {
	t.Helper()
	o, err := newOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The flags default to DefaultConfig, field by field.
func TestFlagDefaultsAreDefaultConfig(t *testing.T) {
	f, err := parseFlags([]string{"--deployment-id", "v1"}, mustOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.DeploymentID, want.ProcessID = "v1", defaultProcessID("v1")
	if !reflect.DeepEqual(f.cfg, want) {
		t.Fatalf("parsed defaults\n%+v\nwant DefaultConfig\n%+v", f.cfg, want)
	}
	if err := want.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a deployment: %v", err)
	}
}

func TestLimitFlags(t *testing.T) {
	f, err := parseFlags([]string{"--deployment-id", "v1", "--max-steps-per-turn", "7",
		"--max-tokens-per-turn", "1000", "--max-tokens-per-session", "50000"}, mustOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.cfg; c.MaxStepsPerTurn != 7 || c.MaxTokensPerTurn != 1000 || c.MaxTokensPerSession != 50000 {
		t.Fatalf("limits %d %d %d", c.MaxStepsPerTurn, c.MaxTokensPerTurn, c.MaxTokensPerSession)
	}
	pc := resolved{Config: f.cfg}.poolConfig(nil, nil, nil, nil, nil, nil, nil)
	if pc.MaxStepsPerTurn != 7 || pc.MaxTokensPerTurn != 1000 || pc.MaxTokensPerSession != 50000 {
		t.Fatalf("pool limits %d %d %d", pc.MaxStepsPerTurn, pc.MaxTokensPerTurn, pc.MaxTokensPerSession)
	}
	if DefaultConfig().MaxStepsPerTurn != pool.DefaultMaxStepsPerTurn {
		t.Fatalf("default max steps %d, pool's %d", DefaultConfig().MaxStepsPerTurn, pool.DefaultMaxStepsPerTurn)
	}
}

// --step-retries and --step-retry-backoff default to the pool's policy
// (2; 1s,5s), parse into Config and reach the pool as its StepRetry.
func TestStepRetryFlags(t *testing.T) {
	d := DefaultConfig()
	if d.StepRetries != 2 || !slices.Equal(d.StepRetryBackoff, []time.Duration{time.Second, 5 * time.Second}) {
		t.Fatalf("defaults: %d %v, want 2 [1s 5s]", d.StepRetries, d.StepRetryBackoff)
	}
	f, err := parseFlags([]string{"--deployment-id", "v1", "--step-retries", "4", "--step-retry-backoff", "100ms,2s,30s"}, mustOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{100 * time.Millisecond, 2 * time.Second, 30 * time.Second}
	if c := f.cfg; c.StepRetries != 4 || !slices.Equal(c.StepRetryBackoff, want) {
		t.Fatalf("parsed %d %v", c.StepRetries, c.StepRetryBackoff)
	}
	pc := resolved{Config: f.cfg}.poolConfig(nil, nil, nil, nil, nil, nil, nil)
	if pc.StepRetry.Retries != 4 || !slices.Equal(pc.StepRetry.Backoff, want) {
		t.Fatalf("pool policy %+v", pc.StepRetry)
	}
	f, err = parseFlags([]string{"--deployment-id", "v1", "--step-retries", "0"}, mustOptions(t))
	if err != nil || f.cfg.StepRetries != 0 {
		t.Fatalf("--step-retries 0: %v %d", err, f.cfg.StepRetries)
	}
}

// Every bad value is a usage error naming its flag, before anything runs.
func TestUsageErrors(t *testing.T) {
	o := mustOptions(t)
	for _, tc := range []struct {
		reason string
		args   []string
	}{
		{"--max-steps-per-turn -1: want 0", []string{"--max-steps-per-turn", "-1"}},
		{"--max-tokens-per-turn -1: want 0 (no limit)", []string{"--max-tokens-per-turn", "-1"}},
		{"--max-tokens-per-session -5: want 0 (no limit)", []string{"--max-tokens-per-session", "-5"}},
		{`invalid value "x" for flag -max-tokens-per-session`, []string{"--max-tokens-per-session", "x"}},
		{"--step-retries -1: want 0 (never) or more", []string{"--step-retries", "-1"}},
		{`invalid value "1s,-1s" for flag -step-retry-backoff: a negative wait`, []string{"--step-retry-backoff", "1s,-1s"}},
		{`invalid value "1s,x" for flag -step-retry-backoff`, []string{"--step-retry-backoff", "1s,x"}},
		{"--lease-ttl 1.5s: want whole seconds", []string{"--lease-ttl", "1500ms"}},
		{"--process-id", []string{"--process-id", "a.b"}},
		{"--metrics-listen", []string{"--metrics-listen", "nope"}},
		{"--nats-listen", []string{"--nats-listen", ":4222"}},
		{"flag provided but not defined: -fault", []string{"--fault", "crash-after-commit"}},
		{"flag provided but not defined: -exec-log", []string{"--exec-log", "x.jsonl"}},
		{`--agent "python": want builtin or nats`, []string{"--agent", "python"}},
		{"--agent-heartbeat-timeout 1s: at least twice --agent-heartbeat-interval (1s)", []string{"--agent", "nats", "--agent-heartbeat-timeout", "1s", "--agent-heartbeat-interval", "1s"}},
		{"--agent-unavailable-after -1s: not negative", []string{"--agent", "nats", "--agent-unavailable-after", "-1s"}},
		{`--agent-event-kinds: "turn.completed" is empty or a reserved kind`, []string{"--agent", "nats", "--agent-event-kinds", "note,turn.completed"}},
	} {
		_, err := parseFlags(append([]string{"--deployment-id", "v1"}, tc.args...), o)
		if !errors.Is(err, app.ErrUsage) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.reason)
		}
	}
}

// The test aids are flags only of a binary that opts into them.
func TestTestAidOptions(t *testing.T) {
	var got ExecLog
	o := mustOptions(t, WithFaultFlag(), WithExecLog(func(l ExecLog, _ string) { got = l }))
	f, err := parseFlags([]string{"--deployment-id", "v1", "--fault", "crash-after-claim:2", "--exec-log", "x.jsonl"}, o)
	if err != nil || f.fault != "crash-after-claim:2" || f.execLog != "x.jsonl" {
		t.Fatalf("parse: %v, %+v", err, f)
	}
	if x := f.extras(o); x.attach == nil || got != nil {
		t.Fatalf("extras %+v: want WithExecLog's hook, not yet called", x)
	}
	if _, err := parseFlags([]string{"--deployment-id", "v1", "--fault", "crash-after-lunch"}, o); !errors.Is(err, app.ErrUsage) {
		t.Fatalf("unknown fault point: %v", err)
	}
	for _, bad := range []Option{WithName(""), WithExecLog(nil)} {
		if _, err := newOptions([]Option{bad}); !errors.Is(err, ErrOption) {
			t.Errorf("newOptions: %v, want ErrOption", err)
		}
	}
}

// --help shows the binary's name and about text; exit codes are Main's.
func TestExecHelpAndExitCodes(t *testing.T) {
	b := binary(nil, mustOptions(t, WithName("myowner"), WithAbout("Runs my agent.")))
	var stdout, stderr bytes.Buffer
	if code := app.Exec(t.Context(), b, []string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help: exit %d, %s", code, stderr.String())
	}
	for _, want := range []string{"Usage: myowner [flags]", "Runs my agent.", "-max-tokens-per-session", "-quarantine-backoff", "-step-retries", "-step-retry-backoff"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "-fault") || strings.Contains(stdout.String(), "-exec-log") {
		t.Errorf("--help offers a test aid the binary did not opt into:\n%s", stdout.String())
	}
	stdout.Reset()
	code := app.Exec(t.Context(), b, []string{"--deployment-id", "v1", "--max-steps-per-turn", "-1"}, &stdout, &stderr)
	if code != 2 || !strings.HasPrefix(stderr.String(), "myowner: usage: --max-steps-per-turn -1") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the flag", code, stderr.String())
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--deployment-id") {
		t.Fatalf("no deployment: %v", err)
	}
	cfg.DeploymentID = "v1"
	for name, change := range map[string]func(*Config){
		"--max-steps-per-turn":     func(c *Config) { c.MaxStepsPerTurn = -1 },
		"--max-tokens-per-turn":    func(c *Config) { c.MaxTokensPerTurn = -1 },
		"--max-tokens-per-session": func(c *Config) { c.MaxTokensPerSession = -1 },
		"--quarantine-backoff":     func(c *Config) { c.QuarantineBackoff = []time.Duration{time.Second, -time.Second} },
		"--step-retries":           func(c *Config) { c.StepRetries = -1 },
		"--step-retry-backoff":     func(c *Config) { c.StepRetryBackoff = []time.Duration{-time.Second} },
		"--drain-timeout":          func(c *Config) { c.DrainTimeout = -time.Second },
		"--replicas 3 needs":       func(c *Config) { c.Replicas = 3 },
	} {
		bad := cfg
		change(&bad)
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming it", name, err)
		}
		if err := Run(t.Context(), bad, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Run with a bad %s: %v", name, err)
		}
	}
	if err := Run(t.Context(), cfg, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "no agent") {
		t.Errorf("Run without an agent: %v", err)
	}
}

// WithFlags: the binary's flags are parsed with owner's and listed by
// --help; check runs after parsing, and its error, a clash with an owner
// flag, a name registered twice or a nil register is a usage error.
func TestWithFlags(t *testing.T) {
	var model string
	var retries int
	checked := 0
	register := func(fs *flag.FlagSet) {
		fs.StringVar(&model, "model", "gpt-4o-mini", "the model the agent calls")
		fs.IntVar(&retries, "model-retries", 4, "retries of a failed model call")
	}
	check := func() error {
		checked++
		if retries < 0 {
			return fmt.Errorf("--model-retries %d: want ≥ 0", retries)
		}
		return nil
	}
	o := mustOptions(t, WithFlags(register, check))
	f, err := parseFlags([]string{"--deployment-id", "v1", "--model", "llama3.2", "--max-steps-per-turn", "9"}, o)
	if err != nil || model != "llama3.2" || retries != 4 || f.cfg.MaxStepsPerTurn != 9 || checked != 1 {
		t.Fatalf("parse: %v; model %q, retries %d, max steps %d, checked %d", err, model, retries, f.cfg.MaxStepsPerTurn, checked)
	}
	_, err = parseFlags([]string{"--deployment-id", "v1", "--model-retries", "-1"}, o)
	if !errors.Is(err, app.ErrUsage) || !strings.Contains(err.Error(), "--model-retries -1: want ≥ 0") {
		t.Fatalf("check's error: %v, want a usage error", err)
	}
	checked = 0
	if _, err := parseFlags([]string{"--deployment-id", "v1", "--lease-ttl", "1500ms"}, o); !errors.Is(err, app.ErrUsage) || checked != 0 {
		t.Fatalf("a bad owner flag: %v, checked %d; want owner's usage error before check runs", err, checked)
	}
	if _, err := parseFlags([]string{"--nats-only"}, o); err != nil || checked != 0 {
		t.Fatalf("--nats-only: %v, checked %d; want no check", err, checked)
	}
	if _, err := parseFlags([]string{"--deployment-id", "v1"}, mustOptions(t, WithFlags(register, nil))); err != nil {
		t.Fatalf("a nil check: %v", err)
	}
	for _, tc := range []struct {
		reason string
		opts   []Option
	}{
		{"--lease-ttl already defined", []Option{WithFlags(func(fs *flag.FlagSet) { fs.Duration("lease-ttl", 0, "mine") }, nil)}},
		{"--deployment-id already defined", []Option{WithFlags(func(fs *flag.FlagSet) { fs.String("deployment-id", "", "mine") }, nil)}},
		{"--model already defined", []Option{WithFlags(register, nil), WithFlags(func(fs *flag.FlagSet) { fs.String("model", "", "again") }, nil)}},
		{"register panicked", []Option{WithFlags(func(fs *flag.FlagSet) { fs.String("x", "", ""); fs.String("x", "", "") }, nil)}},
	} {
		_, err := parseFlags([]string{"--deployment-id", "v1"}, mustOptions(t, tc.opts...))
		if !errors.Is(err, app.ErrUsage) || !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want a usage error (ErrOption) naming it", tc.reason, err)
		}
	}
	if _, err := newOptions([]Option{WithFlags(nil, check)}); !errors.Is(err, ErrOption) {
		t.Errorf("a nil register: %v, want ErrOption", err)
	}
}

// --help lists the binary's flags with their defaults; a check error and
// a clash exit 2 with the usage line.
func TestWithFlagsHelpAndExit(t *testing.T) {
	var model string
	b := binary(nil, mustOptions(t, WithName("llm"), WithFlags(
		func(fs *flag.FlagSet) { fs.StringVar(&model, "model", "gpt-4o-mini", "the model the agent calls") },
		func() error { return errors.New("--model: empty") })))
	var stdout, stderr bytes.Buffer
	if code := app.Exec(t.Context(), b, []string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help: exit %d, %s", code, stderr.String())
	}
	for _, want := range []string{"-model string", "the model the agent calls (default \"gpt-4o-mini\")", "-lease-ttl"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, stdout.String())
		}
	}
	code := app.Exec(t.Context(), b, []string{"--deployment-id", "v1"}, &stdout, &stderr)
	if code != 2 || !strings.HasPrefix(stderr.String(), "llm: usage: --model: empty") {
		t.Fatalf("exit %d, stderr %q; want 2 with check's error", code, stderr.String())
	}
	stderr.Reset()
	clash := binary(nil, mustOptions(t, WithFlags(func(fs *flag.FlagSet) { fs.Int("replicas", 1, "mine") }, nil)))
	if code := app.Exec(t.Context(), clash, []string{"--help"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--replicas already defined") {
		t.Fatalf("a clash: exit %d, stderr %q; want 2 naming the flag", code, stderr.String())
	}
}

// WithCleanup's functions run once, the last added first, when Main is
// done: after a usage error (a check's, once the checks ran) and after
// the owner stopped.
func TestWithCleanup(t *testing.T) {
	var ran []string
	b := binary(nil, mustOptions(t, WithFlags(func(*flag.FlagSet) {}, func() error { return errors.New("--x: bad") }),
		WithCleanup(func() { ran = append(ran, "first") }), WithCleanup(func() { ran = append(ran, "second") })))
	var stdout, stderr bytes.Buffer
	if code := app.Exec(t.Context(), b, []string{"--deployment-id", "v1"}, &stdout, &stderr); code != 2 || !slices.Equal(ran, []string{"second", "first"}) {
		t.Fatalf("a usage error: exit %d, cleanups %q; want 2, both, the last first", code, ran)
	}
	ran = nil
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // Run returns at once
	args := []string{"--nats-only", "--nats-listen", "127.0.0.1:-1", "--data-dir", t.TempDir()}
	b = binary(nil, mustOptions(t, WithCleanup(func() { ran = append(ran, "stopped") })))
	if code := app.Exec(ctx, b, args, &stdout, &stderr); code != 0 || !slices.Equal(ran, []string{"stopped"}) {
		t.Fatalf("after Run: exit %d, cleanups %q, stderr %s; want 0 and one run", code, ran, stderr.String())
	}
	if _, err := newOptions([]Option{WithCleanup(nil)}); !errors.Is(err, ErrOption) {
		t.Fatalf("WithCleanup(nil): %v, want ErrOption", err)
	}
}

// --agent nats replaces the binary's agent by a remote one with the
// flags' settings.
func TestAgentNATSFlag(t *testing.T) {
	f, err := parseFlags([]string{"--deployment-id", "v1", "--agent", "nats", "--agent-event-kinds", "note,tool.used",
		"--agent-unavailable-after", "5s", "--agent-inline-bytes", "1024"}, mustOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	a, ok := f.agent.agent(nil).(*remoteAgent)
	if !ok {
		t.Fatalf("--agent nats gives %T", f.agent.agent(nil))
	}
	if !slices.Equal(a.EventKinds(), []string{"note", "tool.used"}) || a.cfg.UnavailableAfter != 5*time.Second || a.cfg.InlineBytes != 1024 {
		t.Fatalf("remote config %+v", a.cfg)
	}
	if _, err := a.Step(t.Context(), runtime.StepInput{}); err == nil {
		t.Fatal("an unbound remote agent ran a step")
	}
	builtin := RemoteAgent(RemoteConfig{}) // any agent stands for the binary's
	f, err = parseFlags([]string{"--deployment-id", "v1"}, mustOptions(t))
	if err != nil || f.agent.agent(builtin) != builtin {
		t.Fatalf("default --agent builtin: %v", err)
	}
}
