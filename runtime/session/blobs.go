package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/baton-rt/baton/wire"
)

// blobStore stores a session's out-of-line content in the Blobs port (the
// baton_state object store) under wire.BlobName(sessionID, ref): agent state above
// wire.MaxInlineBytes, message.output text and admitted delivery texts above
// wire.MaxInlineTextBytes. A blob is written before the commit that
// references it, so a committed record never points at a missing object;
// the blob of a commit that lost its CAS is an unreferenced object.
type blobStore struct {
	obs Blobs
	inv Inventory // nil: none (nothing is recorded, only a superseded state collected)

	mu    sync.Mutex
	known map[string]bool // names this process wrote or read (bounded)
}

// maxKnownBlobs bounds the names a process remembers as stored.
const maxKnownBlobs = 4096

func newBlobStore(obs Blobs, inv Inventory) *blobStore {
	return &blobStore{obs: obs, inv: inv, known: map[string]bool{}}
}

// put stores data for the session (once: content-addressed) and returns its
// reference, recording it in the inventory first: pinned when an event
// refers to it (kept while the session lives), else collected once no
// commit refers to it (collect).
func (b *blobStore) put(ctx context.Context, sessionID string, data []byte, pinned bool) (wire.BlobRef, error) {
	ref := wire.NewBlobRef(data)
	name := wire.BlobName(sessionID, ref)
	key := name
	if pinned {
		key = "p:" + name
	}
	if b.isKnown(key) {
		return ref, nil
	}
	if b.inv != nil {
		if err := b.inv.Own(ctx, sessionID, ref.Digest, pinned); err != nil {
			return wire.BlobRef{}, fmt.Errorf("session: record blob %s: %w", name, err)
		}
	}
	if !b.isKnown(name) {
		if err := b.obs.Put(ctx, name, data); err != nil {
			return wire.BlobRef{}, fmt.Errorf("session: store blob %s: %w", name, err)
		}
		b.remember(name, true)
	}
	b.remember(key, true)
	return ref, nil
}

// get reads a session's blob and verifies it against its reference.
func (b *blobStore) get(ctx context.Context, sessionID string, ref wire.BlobRef) ([]byte, error) {
	name := wire.BlobName(sessionID, ref)
	data, err := b.obs.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("session: blob %s: %w", name, err)
	}
	if err := ref.Verify(data); err != nil {
		return nil, fmt.Errorf("session: blob %s: %w", name, err)
	}
	b.remember(name, true)
	return data, nil
}

// remove deletes a blob of the session that nothing it committed refers
// to any more — unless an event refers to it (pinned) — then its
// inventory record.
func (b *blobStore) remove(ctx context.Context, sessionID, digest string) error {
	name := sessionID + "/" + digest
	if b.inv != nil {
		pinned, err := b.inv.Pinned(ctx, sessionID, digest)
		if err != nil {
			return fmt.Errorf("session: blob %s: %w", name, err)
		}
		if pinned {
			return b.inv.Disown(ctx, sessionID, digest)
		}
	}
	b.remember(name, false)
	if err := b.obs.Delete(ctx, name); err != nil {
		return fmt.Errorf("session: delete blob %s: %w", name, err)
	}
	if b.inv != nil {
		return b.inv.Disown(ctx, sessionID, digest)
	}
	return nil
}

func (b *blobStore) isKnown(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[name]
}

func (b *blobStore) remember(name string, stored bool) {
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

// forget drops what this process remembers of session id's blobs: a run
// that claims the session starts without it, since another process may
// have deleted a blob this one stored (the session ran there meanwhile
// and its commits no longer referred to it).
func (b *blobStore) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name := range b.known {
		if strings.HasPrefix(name, id+"/") || strings.HasPrefix(name, "p:"+id+"/") {
			delete(b.known, name)
		}
	}
}

// externalise moves a checkpoint's content that is too large to keep inline
// to the session's blobs, before the commit that references them: agent
// state above wire.MaxInlineBytes (stateRef) and admitted delivery texts
// above wire.MaxInlineTextBytes (textRef). The checkpoint then encodes at
// state version 2; one that needs neither stays at version 1.
func (b *blobStore) externalise(ctx context.Context, cp *wire.Checkpoint) error {
	if len(cp.State) > wire.MaxInlineBytes {
		ref, err := b.put(ctx, cp.SessionID, cp.State, false)
		if err != nil {
			return err
		}
		cp.State, cp.StateRef = nil, &ref
	}
	inputs := cp.Turn.Inputs
	for i := range inputs {
		if err := b.externaliseInput(ctx, cp.SessionID, &inputs[i]); err != nil {
			return err
		}
	}
	if err := b.externaliseBusy(ctx, cp); err != nil {
		return err
	}
	return b.externaliseTasks(ctx, cp)
}

// externaliseTasks moves task inputs over wire.MaxInlineTextBytes to the
// session's blobs (inputRef).
func (b *blobStore) externaliseTasks(ctx context.Context, cp *wire.Checkpoint) error {
	tasks := cp.Waits.Tasks
	for i := range tasks {
		if len(tasks[i].Input) <= wire.MaxInlineTextBytes {
			continue
		}
		ref, err := b.put(ctx, cp.SessionID, tasks[i].Input, false)
		if err != nil {
			return err
		}
		tasks[i].Input, tasks[i].InputRef = nil, &ref
	}
	return nil
}

// externaliseInput moves an admitted delivery's long text, or the encoding
// of its stored payloads when that is long, to the session's blobs.
func (b *blobStore) externaliseInput(ctx context.Context, sessionID string, in *wire.TurnInput) error {
	if in.Payloads != nil {
		data, err := json.Marshal(in.Payloads)
		if err != nil || len(data) <= wire.MaxInlineTextBytes {
			return err
		}
		ref, err := b.put(ctx, sessionID, data, false)
		if err != nil {
			return err
		}
		in.Payloads, in.PayloadsRef = nil, &ref
		return nil
	}
	if len(in.Text) <= wire.MaxInlineTextBytes {
		return nil
	}
	ref, err := b.put(ctx, sessionID, []byte(in.Text), false)
	if err != nil {
		return err
	}
	in.Text, in.TextRef = "", &ref
	return nil
}

// hydrate reads a decoded checkpoint's out-of-line state and input texts
// back into its snapshot.
func (b *blobStore) hydrate(ctx context.Context, sessionID string, d *Checkpoint) error {
	if d.stateRef != nil {
		data, err := b.get(ctx, sessionID, *d.stateRef)
		if err != nil {
			return fmt.Errorf("session: state of %s: %w", sessionID, err)
		}
		d.Snap.State = data
	}
	if err := b.hydrateTasks(ctx, sessionID, d); err != nil {
		return err
	}
	if err := b.hydrateBusy(ctx, sessionID, d); err != nil {
		return err
	}
	if d.Snap.Turn == nil {
		return nil
	}
	inputs := d.Snap.Turn.Inputs
	for i := range inputs {
		if err := b.hydrateInput(ctx, sessionID, &inputs[i]); err != nil {
			return err
		}
	}
	return nil
}

// hydrateTasks reads the out-of-line inputs of live tasks back.
func (b *blobStore) hydrateTasks(ctx context.Context, sessionID string, d *Checkpoint) error {
	tasks := d.Snap.Waits.Tasks
	for i := range tasks {
		ref, ok := d.taskRefs[tasks[i].ID]
		if !ok {
			continue
		}
		data, err := b.get(ctx, sessionID, ref)
		if err != nil {
			return fmt.Errorf("session: input of task %s of %s: %w", tasks[i].ID, sessionID, err)
		}
		tasks[i].Input = data
	}
	return nil
}

// hydrateInput reads an admitted delivery's out-of-line text or payloads
// back, then restores what the checkpoint left out (wire.ExpandInput).
func (b *blobStore) hydrateInput(ctx context.Context, sessionID string, in *wire.TurnInput) error {
	switch {
	case in.TextRef != nil:
		data, err := b.get(ctx, sessionID, *in.TextRef)
		if err != nil {
			return fmt.Errorf("session: input text of %s: %w", sessionID, err)
		}
		in.Text, in.TextRef = string(data), nil
	case in.PayloadsRef != nil:
		data, err := b.get(ctx, sessionID, *in.PayloadsRef)
		if err != nil {
			return fmt.Errorf("session: input payloads of %s: %w", sessionID, err)
		}
		var ps []wire.Payload
		if err := json.Unmarshal(data, &ps); err != nil {
			return fmt.Errorf("session: input payloads of %s: %w", sessionID, err)
		}
		in.Payloads, in.PayloadsRef = ps, nil
	default:
		return nil
	}
	*in = wire.ExpandInput(*in)
	return nil
}

// outputRef stores a message.output text longer than wire.MaxInlineTextBytes
// out of line and returns the event's data with the reference instead
// (unchanged data otherwise). Event blobs live as long as the session's
// events; the ingress resolves them for its readers.
func (b *blobStore) outputRef(ctx context.Context, sessionID string, data []byte) ([]byte, error) {
	var out wire.MessageOutput
	if len(data) <= wire.MaxInlineTextBytes || json.Unmarshal(data, &out) != nil || len(out.Text) <= wire.MaxInlineTextBytes {
		return data, nil
	}
	ref, err := b.put(ctx, sessionID, []byte(out.Text), true)
	if err != nil {
		return nil, err
	}
	out.Text, out.Ref = "", &ref
	return json.Marshal(out)
}

// resultRef stores a task.completed result longer than
// wire.MaxInlineTextBytes out of line (resultRef), like outputRef.
func (b *blobStore) resultRef(ctx context.Context, sessionID string, data []byte) ([]byte, error) {
	var done wire.TaskCompletedV2
	if len(data) <= wire.MaxInlineTextBytes || json.Unmarshal(data, &done) != nil || len(done.Result) <= wire.MaxInlineTextBytes {
		return data, nil
	}
	ref, err := b.put(ctx, sessionID, done.Result, true)
	if err != nil {
		return nil, err
	}
	done.Result, done.ResultRef = nil, &ref
	return json.Marshal(done)
}
