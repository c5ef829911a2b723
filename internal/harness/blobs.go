package harness

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// SessionBlobs are a session's blobs as stored and as referred to: the
// objects of the state store named <sessionID>/<digest> (Stored, by
// digest) and the digests its committed checkpoint (state, admitted
// inputs' texts and payloads, task inputs) and its events (message.output
// refs, task.completed resultRefs, session.quarantined checkpointRefs)
// refer to (Referred), and its checkpoint's history segments with
// whether each is stored (Segments).
type SessionBlobs struct {
	Stored   []string
	Referred []string
	Segments map[string]bool
}

// ReadSessionBlobs reads what session id stores and refers to: cp is its
// committed checkpoint, evs its events as stored (Env.Events).
func ReadSessionBlobs(ctx context.Context, js jetstream.JetStream, names subjects.Names, id string, cp wire.Checkpoint, evs []wire.Event) (SessionBlobs, error) {
	var b SessionBlobs
	obs, err := js.ObjectStore(ctx, names.StateBucket())
	if err != nil {
		return b, err
	}
	infos, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return b, err
	}
	all := map[string]bool{}
	for _, i := range infos {
		all[i.Name] = true
		if d, ok := strings.CutPrefix(i.Name, id+"/"); ok {
			b.Stored = append(b.Stored, d)
		}
	}
	add := func(ref *wire.BlobRef) {
		if ref != nil {
			b.Referred = append(b.Referred, ref.Digest)
		}
	}
	add(cp.StateRef)
	for _, in := range cp.Turn.Inputs {
		add(in.TextRef)
		add(in.PayloadsRef)
	}
	for _, t := range cp.Waits.Tasks {
		add(t.InputRef)
	}
	for _, ev := range evs {
		var d struct {
			Ref           *wire.BlobRef `json:"ref"`
			ResultRef     *wire.BlobRef `json:"resultRef"`
			CheckpointRef *wire.BlobRef `json:"checkpointRef"`
		}
		switch ev.Kind {
		case wire.EventMessageOutput, wire.EventTaskCompleted, wire.EventSessionQuarantined:
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return b, err
			}
			add(d.Ref)
			add(d.ResultRef)
			add(d.CheckpointRef)
		}
	}
	b.Segments = map[string]bool{}
	for _, s := range cp.HistorySegments {
		b.Segments[s.Digest] = all[s.Digest]
	}
	slices.Sort(b.Stored)
	slices.Sort(b.Referred)
	b.Referred = slices.Compact(b.Referred)
	return b, nil
}

// Exact reports whether the session stores exactly the blobs it refers to
// and every segment it refers to; what differs otherwise.
func (b SessionBlobs) Exact() (bool, []string) {
	var diff []string
	for _, d := range b.Stored {
		if !slices.Contains(b.Referred, d) {
			diff = append(diff, "stored, referred to by nothing: "+d)
		}
	}
	for _, d := range b.Referred {
		if !slices.Contains(b.Stored, d) {
			diff = append(diff, "referred to, not stored: "+d)
		}
	}
	for d, ok := range b.Segments {
		if !ok {
			diff = append(diff, "history segment not stored: "+d)
		}
	}
	return len(diff) == 0, diff
}
