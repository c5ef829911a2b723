package wire

// Size limits. Each is checked by the codec that owns the shape; exceeding it
// is an error wrapping ErrTooLarge, never a truncation. docs/wire.md,
// "Limits", says which limit is which and how they nest.
const (
	// MaxCommandBytes bounds one encoded inbox command. It stays below the
	// NATS default max_payload (1 MiB) with 64 KiB left for headers, so a
	// command that encodes always publishes.
	MaxCommandBytes = 1<<20 - 64<<10

	// MaxRecordBytes is the default largest session record: the
	// baton_sessions bucket's max value size. The checkpoint limit derives
	// from it.
	MaxRecordBytes = 512 << 10

	// RecordHeadroomBytes is what a session record needs besides its
	// checkpoint: ownership fields, the handoff outcome, and the headers a
	// CAS adds (the bucket's max value size counts them).
	RecordHeadroomBytes = 16 << 10

	// MaxCheckpointBytes bounds one encoded checkpoint, including its
	// outbox, so the session record that embeds it always fits the bucket.
	MaxCheckpointBytes = MaxRecordBytes - RecordHeadroomBytes

	// MaxEventDataBytes bounds the data of one session event as stored.
	// Larger message.output text is stored out of line and referenced by a
	// BlobRef (MaxInlineTextBytes).
	MaxEventDataBytes = 16 << 10

	// MaxEventBytes bounds one encoded event envelope (data plus envelope).
	MaxEventBytes = MaxEventDataBytes + 2<<10

	// MaxInlineTextBytes is the largest text kept inline: a message.output
	// text, or an admitted delivery's text in a checkpoint. Longer text is
	// stored out of line (message.output ref, TurnInput.TextRef).
	MaxInlineTextBytes = 8 << 10

	// MaxStepEventBytes bounds the event data of one step, all its events
	// together (out-of-line text counted as its reference), so a step's
	// outbox always fits the checkpoint.
	MaxStepEventBytes = 128 << 10

	// MaxStepEvents bounds the number of events one step returns.
	MaxStepEvents = 512

	// MaxOutputBytes bounds one message.output text, stored out of line.
	MaxOutputBytes = 8 << 20

	// MaxInlineBytes bounds inline history and inline authored state in a
	// checkpoint. Anything larger goes to the object store (HistorySegments,
	// StateRef), so a long conversation never hits the KV value limit.
	MaxInlineBytes = 128 << 10

	// MaxStateBytes bounds an agent's state, stored out of line above
	// MaxInlineBytes.
	MaxStateBytes = 8 << 20

	// MaxBoundaryBytes bounds what the commands one boundary admits add
	// to its commit, as estimated by the machine: their events in the
	// outbox, their inputs in turn.inputs, the commands they send, the
	// applied set's growth. Commands beyond it wait, in order, for the next
	// boundary, which runs as soon as the commit lands (docs/runtime.md
	// R3). A sixteenth of the checkpoint.
	MaxBoundaryBytes = MaxCheckpointBytes / 16

	// BoundaryReserveBytes is kept beyond MaxBoundaryBytes for cancel,
	// reset and clear, so a flood does not defer them past the next
	// boundary (the first of them a boundary meets always applies).
	BoundaryReserveBytes = MaxBoundaryBytes / 2

	// MaxTurnInputBytes and MaxTurnInputs bound the inputs waiting in
	// turn.inputs for a turn's next step (estimated as stored: a text over
	// MaxInlineTextBytes by reference). A steer beyond them waits for the
	// step after; the first input always joins.
	MaxTurnInputBytes = MaxCheckpointBytes / 16
	MaxTurnInputs     = 256

	// MaxAppliedAbove bounds the applied sequences a checkpoint keeps above
	// its lowest unapplied one (Applied.Above: the commands applied while a
	// FIFO command waits, e.g. while paused): beyond it the owner deletes
	// those applied commands from the inbox and forgets them. About 10 KiB.
	MaxAppliedAbove = MaxBoundaryBytes / 64

	// MaxAppliedIDs bounds the applied command IDs a checkpoint remembers for
	// deduplication (oldest dropped first).
	MaxAppliedIDs = 256
)
