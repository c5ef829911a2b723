package app

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// Log attribute keys used across Baton.
const (
	KeySession    = "session"
	KeyDeployment = "deployment"
	KeyProcess    = "process"
	KeyEpoch      = "epoch"
	KeyErr        = "err"
)

// Logger builds the process logger: tint on a terminal (or --log-format
// text), JSON otherwise.
func (c *Common) Logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	text := c.LogFormat == "text" || c.LogFormat == "" && isTerminal(w)
	if text {
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
