package topology

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inboxConfig: every session command, one subject per address token, plus
// the schedule subjects of session timers. Limits retention (work-queue
// degrades badly with many consumers, docs/nats-layout.md); owners purge processed
// commands per subject; no MaxAge, so an unprocessed command never expires.
func inboxConfig(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.Names.InboxStream(),
		Description:       "Baton session inboxes and timers",
		Subjects:          []string{c.Names.InboxAll(), c.Names.SchedAll()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxConsumers:      c.MaxConsumers,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        c.MaxMsgSize,
		Duplicates:        c.DuplicateWindow,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
		AllowRollup:       true, // implied by schedules
		AllowMsgTTL:       true,
		AllowMsgSchedules: true,
	}
}

// eventsConfig: the public per-session event streams. Events never expire
// and nothing purges an ended session's subject yet (docs/nats-layout.md,
// "Events").
func eventsConfig(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.Names.EventsStream(),
		Description:       "Baton public session event streams",
		Subjects:          []string{c.Names.EventsAll()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxConsumers:      c.MaxConsumers,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        c.MaxMsgSize,
		Duplicates:        c.DuplicateWindow,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
		AllowMsgTTL:       true,
		// A commit's events go as one fast batch (runtime/eventlog).
		AllowBatchPublish: true,
	}
}

// tasksConfig: durable background tasks, one subject per deployment, each
// consumed by that deployment's owner pool through one durable consumer.
func tasksConfig(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.Names.TasksStream(),
		Description:       "Baton durable background tasks",
		Subjects:          []string{c.Names.TasksAll()},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxConsumers:      -1, // one durable consumer per deployment
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        c.MaxMsgSize,
		Duplicates:        c.DuplicateWindow,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
	}
}

func sessionsConfig(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       c.Names.SessionsBucket(),
		Description:  "Baton session records (revision CAS is the ownership fence)",
		History:      8,
		MaxValueSize: c.RecordMaxBytes,
		Storage:      jetstream.FileStorage,
		Replicas:     c.Replicas,
	}
}

func hooksConfig(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       c.Names.HooksBucket(),
		Description:  "Baton address hooks and handoff markers",
		History:      4,
		MaxValueSize: 64 << 10,
		Storage:      jetstream.FileStorage,
		Replicas:     c.Replicas,
	}
}

func ownersConfig(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         c.Names.OwnersBucket(),
		Description:    "Baton owner leases, session indexes and deployment records",
		History:        1, // with more history the server stretches short per-key TTLs to LimitMarkerTTL
		MaxValueSize:   64 << 10,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
		LimitMarkerTTL: DefaultLeaseMarkerTTL, // enables per-key TTL for leases
	}
}

// journalConfig: steps' journals (durable effects, runtime.StepInput.Do):
// one create-only entry per journaled call, removed once the step's commit
// landed, each with a per-key TTL as a safety net (kv.JournalTTL). One
// revision per key: a per-key TTL below the marker TTL is honoured only
// then.
func journalConfig(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         c.Names.JournalBucket(),
		Description:    "Baton step journals: recorded results of journaled calls of uncommitted steps",
		History:        1,
		MaxValueSize:   JournalMaxValue,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
		LimitMarkerTTL: JournalMarkerTTL,
	}
}

// indexConfig: the session index (docs/nats-layout.md, "The session
// index"): derived entries, postings and hour markers. A KV bucket in all
// but one setting — it allows deleting a message by sequence (a KV
// bucket denies it), so a removed posting leaves no purge marker in the
// subject state that listings and counts read. nats.go and the nats CLI
// open it as the bucket baton_index.
func indexConfig(c Config) jetstream.StreamConfig {
	b := c.Names.IndexBucket()
	return jetstream.StreamConfig{
		Name:              "KV_" + b,
		Description:       "Baton session index: derived from the session records, rebuilt on request",
		Subjects:          []string{"$KV." + b + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxMsgsPerSubject: 1,
		MaxMsgSize:        64 << 10,
		MaxConsumers:      -1,
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
		AllowDirect:       true,
		AllowRollup:       true,
		DenyDelete:        false,
	}
}

// blobsConfig: the blob inventory (docs/nats-layout.md, "Object store"):
// one empty key per blob a session owns or history segment it refers
// to, so a session's blobs are listed from the subject state and a
// shared segment's referrers counted, without listing the object store.
func blobsConfig(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       c.Names.BlobsBucket(),
		Description:  "Baton blob inventory: the state objects each session owns or refers to",
		History:      1,
		MaxValueSize: 1 << 10,
		Storage:      jetstream.FileStorage,
		Replicas:     c.Replicas,
	}
}

func stateConfig(c Config) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      c.Names.StateBucket(),
		Description: "Baton large session state, referenced by digest",
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}
}
