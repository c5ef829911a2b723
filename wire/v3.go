package wire

import (
	_ "embed"
	"sync"
)

// Version 3: its frozen schema (testdata/schema_v3.json, generated from the
// version-3 Go types when they were current) and its encoder, now a
// down-conversion of the current Command for consumers still stamped
// {v:3}. Versions 4 and 5 added kinds, their bodies and delivery modes
// only, so a command that uses none of them is encoded exactly as a
// version-3 build encoded it (a delivery without a mode with mode queue,
// as for version 4).

// frozenCommandV3 is version 3's frozen schema: what a version-3 consumer
// accepts.
//
//go:embed testdata/schema_v3.json
var frozenCommandV3 []byte

// commandV3 is the compiled frozen schema of version 3.
var commandV3 = sync.OnceValue(func() *contract { return mustCompile("command.v3.json", frozenCommandV3) })

// encodeV3 encodes for a version-3 consumer. A command version 3 cannot
// express (a terminate command, or what only version 5 expresses) is ErrUnsupportedTarget, never silently
// downgraded; any other is checked by the current rules and written as
// version 3 wrote it, stamped "v":3.
func encodeV3(c Command) ([]byte, error) {
	c = normalizeCommand(c)
	if err := c.expressibleInV3(); err != nil {
		return nil, err
	}
	c.V = CurrentVersion
	if err := c.validate(); err != nil {
		err.Version = 3
		return nil, err
	}
	c.legacyMode()
	c.V = 3
	return c.encodeChecked(commandV3())
}

// expressibleInV3 refuses what version 3 has no words for: what version
// 4 has none for either, and the kind terminate and its body.
func (c *Command) expressibleInV3() *Error {
	if err := c.expressibleInV4(); err != nil {
		err.Version = 3
		return err
	}
	switch {
	case v4Kinds[string(c.Kind)]:
		return c.unsupported(3, "kind %q needs inbox version 4", c.Kind)
	case c.Terminate != nil:
		return c.unsupported(3, "terminate needs inbox version 4")
	}
	return nil
}
