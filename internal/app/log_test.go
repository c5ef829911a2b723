package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

type replyError struct{ Code string }

func TestLoggerLines(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			c := Common{LogLevel: "info", LogFormat: format}
			log := c.Logger(&buf).With(KeyDeployment, "v2", KeyComponent, "nats")
			var nilErr error
			var nilReply *replyError
			log.With(KeyDeployment, "v2").Info("drain", "timeout", 30*time.Second, KeyComponent, "nats",
				KeyErr, nilErr, "error", nilReply, "cause", errors.New("boom"))
			line := buf.String()
			for key, n := range map[string]int{"deployment": 1, "component": 1, "timeout": 1} {
				if got := strings.Count(line, key+"="); format == "text" && got != n {
					t.Errorf("%d × %s= in %q", got, key, line)
				}
				if got := strings.Count(line, `"`+key+`":`); format == "json" && got != n {
					t.Errorf("%d × %q in %q", got, key, line)
				}
			}
			for _, bad := range []string{"<nil>", "30000000000", "\x1b[", `"err"`, "err=", "error"} {
				if strings.Contains(line, bad) {
					t.Errorf("line %q contains %q", line, bad)
				}
			}
			if !strings.Contains(line, "30s") || !strings.Contains(line, "boom") {
				t.Errorf("line %q lacks the duration or the error", line)
			}
			if format == "json" {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil || m["timeout"] != "30s" {
					t.Errorf("JSON line %q: %v, timeout %v", line, err, m["timeout"])
				}
				return
			}
			// A date in the timestamp, no colour (the buffer is no terminal).
			if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} `).MatchString(line) {
				t.Errorf("text line %q does not start with a dated timestamp", line)
			}
		})
	}
}

// A group starts a new namespace: its keys may repeat outer ones.
func TestLoggerGroups(t *testing.T) {
	var buf bytes.Buffer
	c := Common{LogLevel: "info", LogFormat: "json"}
	c.Logger(&buf).With("a", 1).WithGroup("g").With("a", 2).Info("x", "a", 3)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	g, _ := m["g"].(map[string]any)
	if m["a"] != 1.0 || g["a"] != 3.0 || strings.Count(buf.String(), `"a"`) != 2 {
		t.Fatalf("line %s", buf.String())
	}
}

func TestLevelGate(t *testing.T) {
	var buf bytes.Buffer
	c := Common{LogLevel: "warn", LogFormat: "json"}
	l := c.Logger(&buf)
	l.Info("hidden")
	if buf.Len() != 0 || l.Enabled(t.Context(), slog.LevelInfo) {
		t.Fatalf("info logged at level warn: %q", buf.String())
	}
}
