package wire

// Size limits. Each is checked by the codec that owns the shape; exceeding it
// is an error wrapping ErrTooLarge, never a truncation.
const (
	// MaxCommandBytes bounds one encoded inbox command. It stays below the
	// NATS default max_payload (1 MiB) with 64 KiB left for headers, so a
	// command that encodes always publishes.
	MaxCommandBytes = 1<<20 - 64<<10

	// MaxEventDataBytes bounds the data of one session event. Larger content
	// (a long model answer) is stored out of line and referenced by a BlobRef.
	MaxEventDataBytes = 16 << 10

	// MaxEventBytes bounds one encoded event envelope (data plus envelope).
	MaxEventBytes = MaxEventDataBytes + 2<<10

	// MaxInlineBytes bounds inline history and inline authored state in a
	// checkpoint. Anything larger goes to the object store (HistorySegments,
	// StateRef), so a long conversation never hits the KV value limit.
	MaxInlineBytes = 128 << 10

	// MaxCheckpointBytes bounds one encoded checkpoint, including its outbox.
	// The session record that embeds it must stay below the KV value limit
	// (max_payload, 1 MiB by default).
	MaxCheckpointBytes = 768 << 10

	// MaxAppliedIDs bounds the applied command IDs a checkpoint remembers for
	// deduplication (oldest dropped first).
	MaxAppliedIDs = 256
)
