package wire

import (
	_ "embed"
	"sync"
)

// Version 2: its frozen schema (testdata/schema_v2.json, generated from the
// version-2 Go types when they were current) and its encoder, now a
// down-conversion of the current Command for consumers still stamped
// {v:2}. Versions 3 to 5 added kinds, their bodies and delivery modes
// only, so a command that uses none of them is encoded exactly as a
// version-2 build encoded it (a delivery without a mode with mode queue,
// as for version 4).

// frozenCommandV2 is version 2's frozen schema: what a version-2 consumer
// accepts.
//
//go:embed testdata/schema_v2.json
var frozenCommandV2 []byte

// commandV2 is the compiled frozen schema of version 2.
var commandV2 = sync.OnceValue(func() *contract { return mustCompile("command.v2.json", frozenCommandV2) })

// encodeV2 encodes for a version-2 consumer. A command version 2 cannot
// express (a tag, terminate or configure command, a busy mode) is
// ErrUnsupportedTarget, never silently downgraded; any other is checked
// by the current rules and written as version 2 wrote it, stamped "v":2.
func encodeV2(c Command) ([]byte, error) {
	c = normalizeCommand(c)
	if err := c.expressibleInV2(); err != nil {
		return nil, err
	}
	c.V = CurrentVersion
	if err := c.validate(); err != nil {
		err.Version = 2
		return nil, err
	}
	c.legacyMode()
	c.V = 2
	return c.encodeChecked(commandV2())
}

// expressibleInV2 refuses what version 2 has no words for: what version
// 3 has none for either, and the kind tag and its body.
func (c *Command) expressibleInV2() *Error {
	if err := c.expressibleInV3(); err != nil {
		err.Version = 2
		return err
	}
	switch {
	case v3Kinds[string(c.Kind)]:
		return c.unsupported(2, "kind %q needs inbox version 3", c.Kind)
	case c.Tag != nil:
		return c.unsupported(2, "tag needs inbox version 3")
	}
	return nil
}
