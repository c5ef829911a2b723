package wire

import (
	_ "embed"
	"slices"
	"strconv"
	"sync"

	genschema "github.com/invopop/jsonschema"
)

// The checkpoint's schemas: the current state version's, generated from
// the Go types, and every older version's, frozen and embedded, which a
// checkpoint written at that version must match (so an owner of that
// version reads it).

// checkpointCurrent is the generated schema of the current checkpoint
// state, its stored commands in the shape they are written at
// (storedCommands).
var checkpointCurrent = sync.OnceValue(func() *contract {
	c, err := newContractWith("checkpoint.v"+strconv.Itoa(CurrentStateVersion)+".json", Checkpoint{}, storedCommands)
	if err != nil {
		panic(err)
	}
	return c
})

// storedCommands states the commands a checkpoint stores (sends[].command,
// pendingSends[].send.command) as they are written: at inbox version
// StoredCommandVersion, whose shape is the current one without the kinds
// tag, terminate and configure and their bodies (none is ever stored,
// Send.validate) and with version 2's delivery (a mode, queue or steer, and
// no debounceMs: Command.storable). And a tag command never waits in a
// turn, so turn.inputs[] has no tag either.
func storedCommands(s *genschema.Schema) {
	if in := s.Definitions["TurnInput"]; in != nil {
		in.Properties.Delete("tag")
	}
	cmd := s.Definitions["Command"]
	if cmd == nil {
		return
	}
	if d := s.Definitions["Deliver"]; d != nil {
		d.AllOf = nil
		d.Properties.Delete("debounceMs")
		prop(d, "mode").Enum = []any{ModeQueue, ModeSteer}
		d.Required = []string{"mode", "payloads"}
	}
	prop(cmd, "v").Const = StoredCommandVersion
	never := []Kind{KindTag, KindTerminate, KindConfigure}
	kind := prop(cmd, "kind")
	kind.Enum = slices.DeleteFunc(kind.Enum, func(k any) bool { return slices.Contains(never, Kind(k.(string))) })
	cmd.AllOf = slices.DeleteFunc(cmd.AllOf, func(a *genschema.Schema) bool { return slices.Contains(never, kindOf(a.If)) })
	for _, k := range never {
		delete(cmd.DependentSchemas, bodyOf[k])
		cmd.Properties.Delete(bodyOf[k])
	}
	delete(s.Definitions, "Tag")
	delete(s.Definitions, "Terminate")
	delete(s.Definitions, "Configure")
}

// frozenCheckpointV1 is state version 1's frozen schema, which a checkpoint
// written at version 1 (content that needs nothing newer) must match, so an
// owner of that version reads it.
//
//go:embed testdata/schema_checkpoint_v1.json
var frozenCheckpointV1 []byte

var checkpointV1 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v1.json", frozenCheckpointV1) })

// frozenCheckpointV2 is state version 2's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v2.json
var frozenCheckpointV2 []byte

var checkpointV2 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v2.json", frozenCheckpointV2) })

// frozenCheckpointV3 is state version 3's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v3.json
var frozenCheckpointV3 []byte

var checkpointV3 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v3.json", frozenCheckpointV3) })

// frozenCheckpointV4 is state version 4's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v4.json
var frozenCheckpointV4 []byte

var checkpointV4 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v4.json", frozenCheckpointV4) })

// frozenCheckpointV5 is state version 5's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v5.json
var frozenCheckpointV5 []byte

var checkpointV5 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v5.json", frozenCheckpointV5) })

// frozenCheckpointV6 is state version 6's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v6.json
var frozenCheckpointV6 []byte

var checkpointV6 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v6.json", frozenCheckpointV6) })

// frozenCheckpointV7 is state version 7's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v7.json
var frozenCheckpointV7 []byte

var checkpointV7 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v7.json", frozenCheckpointV7) })

// frozenCheckpointV8 is state version 8's frozen schema, likewise.
//
//go:embed testdata/schema_checkpoint_v8.json
var frozenCheckpointV8 []byte

var checkpointV8 = sync.OnceValue(func() *contract { return mustCompile("checkpoint.v8.json", frozenCheckpointV8) })

func mustCompile(name string, raw []byte) *contract {
	c, err := compileContract(schemaBase+name, raw)
	if err != nil {
		panic(err)
	}
	return c
}

// checkpointContract is the schema of state version v (MinStateVersion..
// CurrentStateVersion).
func checkpointContract(v int) *contract {
	switch v {
	case 1:
		return checkpointV1()
	case 2:
		return checkpointV2()
	case 3:
		return checkpointV3()
	case 4:
		return checkpointV4()
	case 5:
		return checkpointV5()
	case 6:
		return checkpointV6()
	case 7:
		return checkpointV7()
	case 8:
		return checkpointV8()
	}
	return checkpointCurrent()
}

// CheckpointSchema returns the generated JSON Schema of the current
// checkpoint state version.
func CheckpointSchema() []byte { return append([]byte(nil), checkpointCurrent().raw...) }

// JSONSchemaExtend pins the state version, types the raw fields and
// allows defaultDebounceMs only with defaultMode debounce. (A checkpoint
// at an older version is checked against that version's frozen schema.)
func (Checkpoint) JSONSchemaExtend(s *genschema.Schema) {
	prop(s, "stateV").Const = CurrentStateVersion
	prop(s, "outputSchema").Type = "object"
	tagsSchema(prop(s, "tags"))
	debounce := &genschema.Schema{Properties: genschema.NewProperties(), Required: []string{"defaultMode"}}
	debounce.Properties.Set("defaultMode", &genschema.Schema{Const: ModeDebounce})
	s.DependentSchemas = map[string]*genschema.Schema{"defaultDebounceMs": debounce}
}
