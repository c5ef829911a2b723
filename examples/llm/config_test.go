package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Every bad setting is refused by New (ErrConfig), naming its flag.
func TestConfigValidate(t *testing.T) {
	if _, err := New(DefaultConfig()); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for name, change := range map[string]func(*Config){
		"--model":                func(c *Config) { c.Model = "" },
		"--model-retries":        func(c *Config) { c.Retries = -1 },
		"--model-retry-max-wait": func(c *Config) { c.RetryMaxWait = 0 },
		"first retry wait":       func(c *Config) { c.RetryFirstWait = -time.Second },
	} {
		c := DefaultConfig()
		change(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrConfig naming it", name, err)
		}
	}
}
