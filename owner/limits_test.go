package owner_test

import (
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/pool"
)

// pool.New refuses a negative turn or session limit, and takes 0 (the
// default step cap, no token limit). The check is here because Run passes
// the limits on; runtime/pool's own tests cover the rest of its Config.
func TestPoolRefusesNegativeLimits(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	env := h.Env(h.Server().URL())
	base := pool.Config{NC: env.NC, JS: env.JS, Store: env.Store, Names: env.Names,
		Deployment: "v1", ProcessID: "p1", Agent: echo{}}
	if _, err := pool.New(base); err != nil {
		t.Fatalf("zero limits: %v", err)
	}
	for reason, change := range map[string]func(*pool.Config){
		"max steps per turn -1":     func(c *pool.Config) { c.MaxStepsPerTurn = -1 },
		"max tokens per turn -2":    func(c *pool.Config) { c.MaxTokensPerTurn = -2 },
		"max tokens per session -3": func(c *pool.Config) { c.MaxTokensPerSession = -3 },
	} {
		cfg := base
		change(&cfg)
		if _, err := pool.New(cfg); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: %v, want a refusal", reason, err)
		}
	}
}
