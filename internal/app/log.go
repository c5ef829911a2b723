package app

import (
	"io"
	"log/slog"
	"os"

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
	KeyComponent  = "component"
)

// TextTime is the timestamp of a text log line: date and time to the
// millisecond, local time.
const TextTime = "2006-01-02 15:04:05.000"

// Logger builds the process logger: text (tint) on a terminal or with
// --log-format text, JSON otherwise. Colour only when w is a terminal;
// durations are Go duration strings ("30s") in both formats; every key
// appears once per line and nil values are left out.
func (c *Common) Logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	term := isTerminal(w)
	if c.LogFormat == "text" || c.LogFormat == "" && term {
		return slog.New(newTidy(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: TextTime, NoColor: !term})))
	}
	return slog.New(newTidy(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString})))
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
