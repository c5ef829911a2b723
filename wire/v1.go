package wire

import (
	_ "embed"
	"sync"
)

// Version 1: its frozen schema (testdata/schema_v1.json, generated from the
// version-1 Go types when they were current) and its encoder, now a
// down-conversion of the current Command for consumers still stamped
// {v:1}. Versions 2 to 5 added kinds, members and delivery modes only, so
// a command that uses none of them is encoded exactly as a version-1 build
// encoded it (a delivery without a mode with mode queue, as for version
// 4).

// frozenCommandV1 is version 1's frozen schema: what a version-1 consumer
// accepts.
//
//go:embed testdata/schema_v1.json
var frozenCommandV1 []byte

// commandV1 is the compiled frozen schema of version 1.
var commandV1 = sync.OnceValue(func() *contract { return mustCompile("command.v1.json", frozenCommandV1) })

// encodeV1 encodes for a version-1 consumer. A command version 1 cannot
// express (a kind of version 2, 3, 4 or 5, a busy mode, or a parent's
// envelope members) is ErrUnsupportedTarget, never silently downgraded;
// any other is checked by the current rules and written as version 1
// wrote it, stamped "v":1.
func encodeV1(c Command) ([]byte, error) {
	c = normalizeCommand(c)
	if err := c.expressibleInV1(); err != nil {
		return nil, err
	}
	c.V = CurrentVersion
	if err := c.validate(); err != nil {
		err.Version = 1
		return nil, err
	}
	c.legacyMode()
	c.V = 1
	return c.encodeChecked(commandV1())
}

// expressibleInV1 refuses what version 1 has no words for: what versions
// 2 to 4 have none for either, and what version 2 added.
func (c *Command) expressibleInV1() *Error {
	if err := c.expressibleInV2(); err != nil {
		err.Version = 1
		return err
	}
	switch {
	case v2Kinds[string(c.Kind)]:
		return c.unsupported(1, "kind %q needs inbox version 2", c.Kind)
	case c.ParentSessionID != "" || c.Handle != "" || c.Depth != 0:
		return c.unsupported(1, "parentSessionId, handle and depth need inbox version 2")
	case c.ChildResult != nil || c.ChildWaiting != nil || c.ChildResumed != nil:
		return c.unsupported(1, "childResult, childWaiting and childResumed need inbox version 2")
	}
	return nil
}

// unsupported is ErrUnsupportedTarget for target version v, naming the
// command's kind and ID.
func (c *Command) unsupported(v int, format string, args ...any) *Error {
	e := c.fail(ErrUnsupportedTarget, format, args...)
	e.Version = v
	return e
}
