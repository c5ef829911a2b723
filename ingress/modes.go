package ingress

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Busy modes (docs/api.md, "Busy modes"): a delivery's "mode" and
// "debounce", a session's "defaultMode" and "defaultDebounce" (on create
// and in PATCH /v1/sessions/{id}: a configure command).

// Debounce windows a request may ask for (wire.MinDebounceMs …
// wire.MaxDebounceMs); an owner bounds the whole window further
// (--max-debounce).
const (
	minDebounce = wire.MinDebounceMs * time.Millisecond
	maxDebounce = wire.MaxDebounceMs * time.Millisecond
)

// parseMode checks a delivery's mode and debounce window: mode is one of
// wire.Modes() ("" when absent: the session's default mode); debounce, a
// Go duration of 250ms … 10m, goes with mode debounce and only with it.
func parseMode(mode, debounce *string) (string, int64, error) {
	return checkMode("mode", "debounce", mode, debounce)
}

// checkMode is parseMode for the members named modeKey and debounceKey.
func checkMode(modeKey, debounceKey string, mode, debounce *string) (string, int64, error) {
	m := ""
	if mode != nil {
		if !wire.ValidMode(*mode) {
			return "", 0, bad("%s %q: want one of %s", modeKey, clip(*mode), strings.Join(wire.Modes(), ", "))
		}
		m = *mode
	}
	ms, err := parseDebounce(debounceKey, debounce)
	switch {
	case err != nil:
		return "", 0, err
	case m == wire.ModeDebounce && debounce == nil:
		return "", 0, bad("%s debounce needs a window: %q: \"3s\" (250ms to 10m)", modeKey, debounceKey)
	case m != wire.ModeDebounce && debounce != nil:
		return "", 0, bad("%s goes with %s debounce only", debounceKey, modeKey)
	}
	return m, ms, nil
}

// parseDebounce reads a debounce window (nil: none).
func parseDebounce(name string, s *string) (int64, error) {
	if s == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil || d < minDebounce || d > maxDebounce {
		return 0, bad("%s %q: want a Go duration from %v to %v, such as \"3s\"", name, clip(*s), minDebounce, maxDebounce)
	}
	return d.Milliseconds(), nil
}

// parseConfigure reads a session's default mode (nil when the body names
// none): defaultMode is one of wire.Modes(); defaultDebounce goes with
// defaultMode debounce and only with it.
func parseConfigure(mode, debounce *string) (*wire.Configure, error) {
	if mode == nil && debounce == nil {
		return nil, nil
	}
	if mode == nil {
		return nil, bad("defaultDebounce goes with defaultMode debounce only")
	}
	m, ms, err := checkMode("defaultMode", "defaultDebounce", mode, debounce)
	if err != nil {
		return nil, err
	}
	return &wire.Configure{DefaultMode: m, DefaultDebounceMs: ms}, nil
}

// unsupportedMode refuses a mode (or a default mode) the owning
// deployment's inbox version cannot express: 422 unsupported_mode naming
// the deployment and the version it reads; never downgraded, nothing sent.
func unsupportedMode(v int, owner, mode, what string) *Error {
	return &Error{Err: ErrUnsupportedCommand, Detail: CodeUnsupportedMode, Message: fmt.Sprintf(
		"deployment %s %s and reads inbox wire version %d; mode %q needs version %d (queue and steer work with every version); nothing was sent",
		owner, what, v, mode, wire.BusyVersion)}
}

// modeOf is the busy mode of c a version before wire.BusyVersion cannot
// express ("" when it can).
func modeOf(c wire.Command) string {
	switch {
	case c.Kind == wire.KindConfigure && c.Configure != nil:
		return c.Configure.DefaultMode
	case c.Kind == wire.KindDeliver && c.Deliver != nil && !wire.LegacyMode(c.Deliver.Mode):
		return c.Deliver.Mode
	}
	return ""
}

// checkStartMode refuses a create with a default mode on a deployment
// whose owners do not read wire.BusyVersion: 422 unsupported_mode,
// nothing created.
func (s *Server) checkStartMode(ctx context.Context, a *attached, dep string, c *wire.Configure) error {
	if c == nil {
		return nil
	}
	ok, vs, err := s.readsVersion(ctx, a, dep, wire.BusyVersion)
	switch {
	case err != nil:
		return err
	case !ok:
		v := 1
		for _, x := range vs {
			v = max(v, x)
		}
		return unsupportedMode(v, dep, c.DefaultMode, "would start the session")
	}
	return nil
}

// configureNew sends a created session its default mode (r.Configure), a
// configure command ahead of the first message, so the first message
// already takes it.
func (s *Server) configureNew(ctx context.Context, a *attached, t target, r Request) error {
	if r.Configure == nil {
		return nil
	}
	c := Request{Kind: wire.KindConfigure, Configure: r.Configure, Caller: r.Caller}
	cmd, data, err := s.prepare(a, &c)
	if err == nil {
		_, err = s.publish(ctx, a, t, cmd, data)
	}
	if err != nil {
		e := asError(err)
		return fail(e.Err, "%s (session %s was created without its default mode; set it with PATCH /v1/sessions/%s)", e.Message, t.sessionID, t.sessionID)
	}
	return nil
}
