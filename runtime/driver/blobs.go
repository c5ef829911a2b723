package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// blobs stores a session's out-of-line content in the state object store
// (baton_state) under wire.BlobName(sessionID, ref): agent state above
// wire.MaxInlineBytes, message.output text and admitted delivery texts above
// wire.MaxInlineTextBytes. A blob is written before the commit that
// references it, so a committed record never points at a missing object;
// the blob of a commit that lost its CAS is an unreferenced object.
type blobs struct {
	obs jetstream.ObjectStore

	mu    sync.Mutex
	known map[string]bool // names this process wrote or read (bounded)
}

// maxKnownBlobs bounds the names a process remembers as stored.
const maxKnownBlobs = 4096

func newBlobs(obs jetstream.ObjectStore) *blobs { return &blobs{obs: obs, known: map[string]bool{}} }

// put stores data for the session (once: content-addressed) and returns its
// reference.
func (b *blobs) put(ctx context.Context, sessionID string, data []byte) (wire.BlobRef, error) {
	ref := wire.NewBlobRef(data)
	name := wire.BlobName(sessionID, ref)
	if b.isKnown(name) {
		return ref, nil
	}
	if b.obs == nil {
		return wire.BlobRef{}, errors.New("driver: out-of-line content needs the state object store")
	}
	if _, err := b.obs.PutBytes(ctx, name, data); err != nil {
		return wire.BlobRef{}, fmt.Errorf("driver: store blob %s: %w", name, err)
	}
	b.remember(name, true)
	return ref, nil
}

// get reads a session's blob and verifies it against its reference.
func (b *blobs) get(ctx context.Context, sessionID string, ref wire.BlobRef) ([]byte, error) {
	name := wire.BlobName(sessionID, ref)
	if b.obs == nil {
		return nil, errors.New("driver: out-of-line content needs the state object store")
	}
	data, err := b.obs.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("driver: blob %s: %w", name, err)
	}
	if err := ref.Verify(data); err != nil {
		return nil, fmt.Errorf("driver: blob %s: %w", name, err)
	}
	b.remember(name, true)
	return data, nil
}

// remove deletes a blob no committed record references any more.
func (b *blobs) remove(ctx context.Context, sessionID string, ref wire.BlobRef) error {
	name := wire.BlobName(sessionID, ref)
	b.remember(name, false)
	if b.obs == nil {
		return nil
	}
	if err := b.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("driver: delete blob %s: %w", name, err)
	}
	return nil
}

func (b *blobs) isKnown(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[name]
}

func (b *blobs) remember(name string, stored bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !stored {
		delete(b.known, name)
		return
	}
	if len(b.known) >= maxKnownBlobs {
		clear(b.known) // forgetting only costs an idempotent put
	}
	b.known[name] = true
}

// externalise moves a checkpoint's content that is too large to keep inline
// to the session's blobs, before the commit that references them: agent
// state above wire.MaxInlineBytes (stateRef) and admitted delivery texts
// above wire.MaxInlineTextBytes (textRef). The checkpoint then encodes at
// state version 2; one that needs neither stays at version 1.
func (b *blobs) externalise(ctx context.Context, cp *wire.Checkpoint) error {
	if len(cp.State) > wire.MaxInlineBytes {
		ref, err := b.put(ctx, cp.SessionID, cp.State)
		if err != nil {
			return err
		}
		cp.State, cp.StateRef = nil, &ref
	}
	inputs := cp.Turn.Inputs
	for i := range inputs {
		if len(inputs[i].Text) <= wire.MaxInlineTextBytes {
			continue
		}
		ref, err := b.put(ctx, cp.SessionID, []byte(inputs[i].Text))
		if err != nil {
			return err
		}
		inputs[i].Text, inputs[i].TextRef = "", &ref
	}
	return nil
}

// hydrate reads a decoded checkpoint's out-of-line state and input texts
// back into its snapshot.
func (b *blobs) hydrate(ctx context.Context, sessionID string, d *decoded) error {
	if d.stateRef != nil {
		data, err := b.get(ctx, sessionID, *d.stateRef)
		if err != nil {
			return fmt.Errorf("driver: state of %s: %w", sessionID, err)
		}
		d.snap.State = data
	}
	if d.snap.Turn == nil {
		return nil
	}
	inputs := d.snap.Turn.Inputs
	for i := range inputs {
		if inputs[i].TextRef == nil {
			continue
		}
		data, err := b.get(ctx, sessionID, *inputs[i].TextRef)
		if err != nil {
			return fmt.Errorf("driver: input text of %s: %w", sessionID, err)
		}
		inputs[i].Text, inputs[i].TextRef = string(data), nil
	}
	return nil
}

// outputRef stores a message.output text longer than wire.MaxInlineTextBytes
// out of line and returns the event's data with the reference instead
// (unchanged data otherwise). Event blobs live as long as the session's
// events; the ingress resolves them for its readers.
func (b *blobs) outputRef(ctx context.Context, sessionID string, data []byte) ([]byte, error) {
	var out wire.MessageOutput
	if len(data) <= wire.MaxInlineTextBytes || json.Unmarshal(data, &out) != nil || len(out.Text) <= wire.MaxInlineTextBytes {
		return data, nil
	}
	ref, err := b.put(ctx, sessionID, []byte(out.Text))
	if err != nil {
		return nil, err
	}
	out.Text, out.Ref = "", &ref
	return json.Marshal(out)
}
