package wire

import (
	_ "embed"
	"sync"
)

// Version 4: its frozen schema (testdata/schema_v4.json, generated from the
// version-4 Go types when they were current) and its encoder, now a
// down-conversion of the current Command for consumers still stamped
// {v:4}. Version 5 added a kind and its body (configure), the busy modes
// of a delivery and its debounceMs, and a delivery without a mode (the
// session's default): a command that uses none of them is encoded exactly
// as a version-4 build encoded it, and a delivery without a mode is
// written with mode queue (the default of every session an owner of
// version 4 can hold: a session with another default has state version 9).

// frozenCommandV4 is version 4's frozen schema: what a version-4 consumer
// accepts.
//
//go:embed testdata/schema_v4.json
var frozenCommandV4 []byte

// commandV4 is the compiled frozen schema of version 4.
var commandV4 = sync.OnceValue(func() *contract { return mustCompile("command.v4.json", frozenCommandV4) })

// encodeV4 encodes for a version-4 consumer. A command version 4 cannot
// express (a configure command, a delivery of a busy mode or with
// debounceMs) is ErrUnsupportedTarget, never silently downgraded; any
// other is checked by the current rules and written as version 4 wrote
// it, stamped "v":4.
func encodeV4(c Command) ([]byte, error) {
	c = normalizeCommand(c)
	if err := c.expressibleInV4(); err != nil {
		return nil, err
	}
	c.V = CurrentVersion
	if err := c.validate(); err != nil {
		err.Version = 4
		return nil, err
	}
	c.legacyMode()
	c.V = 4
	return c.encodeChecked(commandV4())
}

// expressibleInV4 refuses what version 4 has no words for: the kind
// configure and its body, the busy modes and debounceMs. A delivery
// without a mode is expressible (legacyMode writes it as queue).
func (c *Command) expressibleInV4() *Error {
	switch {
	case v5Kinds[string(c.Kind)]:
		return c.unsupported(4, "kind %q needs inbox version 5", c.Kind)
	case c.Configure != nil:
		return c.unsupported(4, "configure needs inbox version 5")
	case c.Deliver != nil && !LegacyMode(c.Deliver.Mode):
		return c.unsupported(4, "deliver mode %q needs inbox version 5", c.Deliver.Mode)
	case c.Deliver != nil && c.Deliver.DebounceMs != 0:
		return c.unsupported(4, "deliver.debounceMs needs inbox version 5")
	}
	return nil
}

// legacyMode writes a delivery without a mode as versions 1 to 4 must
// (they require one): mode queue. c's body is its own (normalizeCommand
// copied it).
func (c *Command) legacyMode() {
	if c.Deliver != nil && c.Deliver.Mode == "" {
		c.Deliver.Mode = ModeQueue
	}
}
