package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for Config.
const (
	DefaultMaxConsumers    = 10_000
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultMaxMsgSize      = 1 << 20
	DefaultRecordMaxBytes  = wire.MaxRecordBytes // the checkpoint limit derives from it
	DefaultLeaseMarkerTTL  = 5 * time.Minute
	// JournalMarkerTTL is how long the journal bucket keeps the delete
	// markers of removed entries (and enables its per-key TTLs).
	JournalMarkerTTL = time.Hour
	// JournalMaxValue is the largest journal entry (a larger result goes
	// to the state object store).
	JournalMaxValue = 64 << 10
)

// Config chooses the settings Baton creates its resources with.
type Config struct {
	Names    subjects.Names
	Replicas int // 1 (default) or 3 on a cluster
	// MaxConsumers is the per-stream consumer limit of BATON_INBOX and
	// BATON_EVENTS. nats-server 2.15 caps a stream at 1,000 by default; Baton
	// sets a positive limit on its streams deliberately (default 10,000),
	// which works on any server without server-side configuration.
	MaxConsumers    int
	DuplicateWindow time.Duration // dedupe window of the inbox (default 2m)
	MaxMsgSize      int32         // largest inbox command or event (default 1 MiB)
	RecordMaxBytes  int32         // largest session record (default 512 KiB)
}

func (c Config) withDefaults() Config {
	if c.Names == (subjects.Names{}) {
		c.Names = subjects.Default()
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = DefaultMaxConsumers
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = DefaultMaxMsgSize
	}
	if c.RecordMaxBytes == 0 {
		c.RecordMaxBytes = DefaultRecordMaxBytes
	}
	return c
}

// Topology holds handles to every resource.
type Topology struct {
	Inbox    jetstream.Stream
	Events   jetstream.Stream
	Tasks    jetstream.Stream
	Sessions jetstream.KeyValue
	Hooks    jetstream.KeyValue
	Owners   jetstream.KeyValue
	Journal  jetstream.KeyValue
	Blobs    jetstream.KeyValue
	// IndexStream is the session index (docs/nats-layout.md): the stream
	// behind the KV bucket <prefix>_index.
	IndexStream jetstream.Stream
	State       jetstream.ObjectStore
	// Changes lists what this call created or updated ("created stream
	// BATON_INBOX", "updated stream BATON_INBOX: max_consumers"); empty when
	// everything already matched.
	Changes []string
}

// Ensure creates or updates every resource.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Topology, error) {
	cfg = cfg.withDefaults()
	if cfg.RecordMaxBytes < wire.MaxRecordBytes {
		return nil, fmt.Errorf("topology: session record limit %d bytes: at least %d (wire.MaxRecordBytes: every checkpoint must fit)", cfg.RecordMaxBytes, wire.MaxRecordBytes)
	}
	t := &Topology{}
	for _, s := range []struct {
		dst *jetstream.Stream
		cfg jetstream.StreamConfig
	}{
		{&t.Inbox, inboxConfig(cfg)}, {&t.Events, eventsConfig(cfg)}, {&t.Tasks, tasksConfig(cfg)},
		{&t.IndexStream, indexConfig(cfg)},
	} {
		err := retrySettling(ctx, func(ctx context.Context) (err error) {
			*s.dst, err = t.ensureStream(ctx, js, s.cfg)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for _, b := range []struct {
		dst *jetstream.KeyValue
		cfg jetstream.KeyValueConfig
	}{
		{&t.Sessions, sessionsConfig(cfg)}, {&t.Hooks, hooksConfig(cfg)}, {&t.Owners, ownersConfig(cfg)},
		{&t.Journal, journalConfig(cfg)}, {&t.Blobs, blobsConfig(cfg)},
	} {
		err := retrySettling(ctx, func(ctx context.Context) (err error) {
			*b.dst, err = t.ensureBucket(ctx, js, b.cfg)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	err := retrySettling(ctx, func(ctx context.Context) (err error) {
		t.State, err = t.ensureObjects(ctx, js, stateConfig(cfg))
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Topology) ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if err == nil {
			t.Changes = append(t.Changes, "created stream "+want.Name)
			return s, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("topology: create stream %s: %w", want.Name, err)
		}
		s, err = js.Stream(ctx, want.Name) // another process won the race
	}
	if err != nil {
		return nil, fmt.Errorf("topology: stream %s: %w", want.Name, err)
	}
	return t.reconcile(ctx, js, s, want)
}

func (t *Topology) reconcile(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	have := s.CachedInfo().Config
	if err := immutable(have, want); err != nil {
		return nil, err
	}
	want.Subjects = union(have.Subjects, want.Subjects)
	diff := differences(have, want)
	if len(diff) == 0 {
		return s, nil
	}
	s, err := js.UpdateStream(ctx, merge(have, want))
	if err != nil {
		return nil, fmt.Errorf("topology: update stream %s (%v): %w", want.Name, diff, err)
	}
	t.Changes = append(t.Changes, fmt.Sprintf("updated stream %s: %v", want.Name, diff))
	return s, nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
