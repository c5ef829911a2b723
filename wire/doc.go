// Package wire owns every shape that crosses a durable boundary in Baton:
// inbox commands, session events and session checkpoints. Encode and decode
// functions of this package are the only legal boundary operations; nothing
// else marshals these values for a stream, a KV record or an object.
//
// # Inbox commands
//
// [Command] is the one declared shape of the current wire version
// ([CurrentVersion]). Its JSON Schema is generated from the Go types
// (invopop/jsonschema) and frozen in testdata/schema_v5.json: it is the
// declared contract. Runtime validation is Go code held to that schema by
// tests (equivalence_test.go): a strict standard decoder
// (go-json-experiment/json, the Go project's encoding/json/v2) configured to
// state what the schema says about the JSON text (typed.go) and Go rules
// that state the rest, plus what a schema cannot say (validate.go). The compiled schema
// (santhosh-tekuri/jsonschema) remains the reference path: it decides only
// what the typed path does not accept, and words the errors.
//
//   - [Encode] encodes for the consumer's stamped [Capability] and validates
//     the complete value once before it leaves: producer drift dies at the
//     producer.
//   - [Decode] reads a current-version payload straight into [Command] and
//     validates it; an older payload runs the explicit migration chain of
//     the [Registry] (0→1→2→3→4→5 today) to the current version first. An unknown
//     newer version, an unknown kind or an invalid value is a typed
//     [*Error]; a versioned payload never falls through to a legacy
//     interpretation.
//   - Version 0 is the unversioned era (a legacy deliver envelope and a raw
//     send); Baton never produces it and decodes it only through the pure
//     migration in v0_migration.go.
//
// # Session events
//
// [Event] is the envelope of the public event stream. An [EventRegistry]
// maps each kind to a Go type, a schema generated from it and a validation
// function; built-ins come from [DefaultEvents] and agent code adds its own
// with [RegisterEvent] at start-up. [EncodeEvent] (append) and [DecodeEvent]
// (reload) validate at the durable boundary only, on the same typed path as
// commands (typed.go, shape.go). With a nil registry (the
// ingress) the envelope is validated and an unknown kind's data passes
// through unchanged; with a registry an unknown kind is reported
// ([ErrUnknownKind]) together with the event, never dropped.
//
// # Checkpoints
//
// [Checkpoint] is what a session owner commits in one CAS of its session
// record: settled state, the [Applied] command record and the outbox of
// committed-but-unpublished events. It is written at the lowest state
// version that expresses its content ([MinStateVersion] to
// [CurrentStateVersion]), and a successor refuses a version it cannot read
// before it activates ([ErrUnsupportedState]). Large history, state and
// texts live in an object store, referenced by [BlobRef] ([BlobName] names a
// session's blobs). The size limits, and how they nest so that whatever the
// ingress accepts can be stored, are in limits.go.
//
// The package is a leaf: it imports the standard library, the two JSON
// Schema libraries and the strict JSON decoder only. See docs/wire.md for the version-bump procedure.
package wire
