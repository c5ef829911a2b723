package ingress

import (
	"context"
	"errors"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// CodeBlobNotFound (404): the blob operation names a digest the session
// has no blob of.
const CodeBlobNotFound = "blob_not_found"

// BlobRequest is the NATS blob operation's body {"sessionId","digest",
// "offset"}: a chunk of the session's out-of-line content (a
// message.output's ref, a task result's resultRef) from byte Offset.
type BlobRequest struct {
	SessionID string `json:"sessionId"`
	Digest    string `json:"digest"`
	Offset    int64  `json:"offset"`
}

// BlobChunk answers a blob request: Data the bytes from Offset (base64 in
// JSON), Size the whole content's, EOF whether the chunk ends it (the next
// request's offset is Offset+len(Data)). The content is verified against
// its digest before any chunk is served.
type BlobChunk struct {
	Data   []byte `json:"data"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	EOF    bool   `json:"eof"`
}

var blobKeys = []string{"sessionId", "digest", "offset"}

// ParseBlobRequest parses the blob body: sessionId and digest required
// ("sha256:" and 64 lower-case hex digits), offset ≥ 0 (default 0).
func ParseBlobRequest(b []byte) (BlobRequest, error) {
	var v struct {
		SessionID *string `json:"sessionId"`
		Digest    *string `json:"digest"`
		Offset    *int64  `json:"offset"`
	}
	if err := decodeStrict(b, &v, blobKeys); err != nil {
		return BlobRequest{}, bad("%v", err)
	}
	if v.SessionID == nil || v.Digest == nil {
		return BlobRequest{}, bad("sessionId and digest are required")
	}
	r := BlobRequest{SessionID: *v.SessionID, Digest: *v.Digest}
	if v.Offset != nil {
		r.Offset = *v.Offset
	}
	if err := checkSessionID(r.SessionID); err != nil {
		return BlobRequest{}, err
	}
	if (wire.BlobRef{Digest: r.Digest}).Validate() != nil {
		return BlobRequest{}, bad("digest %q: want sha256: and 64 lower-case hex digits (an event's ref)", clip(r.Digest))
	}
	if r.Offset < 0 {
		return BlobRequest{}, bad("offset %d: want ≥ 0", r.Offset)
	}
	return r, nil
}

// Blob answers the NATS blob operation: a chunk of the session's blob
// with the digest, at most what fits the reply bound. The digest is the
// capability: content hashes name the session's blobs, and only a reader
// of its events (or of the content) knows one. An unknown session is 404,
// a deleted one 410 deleted, an unknown digest 404 blob_not_found,
// content over wire.MaxOutputBytes 413, an offset past the end 400.
func (s *Server) Blob(ctx context.Context, req BlobRequest) (BlobChunk, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return BlobChunk{}, err
	}
	if _, err := a.liveRecord(ctx, req.SessionID); err != nil {
		return BlobChunk{}, err
	}
	ref := wire.BlobRef{Digest: req.Digest}
	name := wire.BlobName(req.SessionID, ref)
	info, err := a.refs.obs.GetInfo(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return BlobChunk{}, &Error{Err: ErrNotFound, Detail: CodeBlobNotFound,
			Message: "session " + req.SessionID + " has no blob " + req.Digest}
	case err != nil:
		return BlobChunk{}, fail(ErrUnavailable, "blob %s: %v", name, err)
	}
	ref.Size = int64(info.Size)
	if ref.Size > wire.MaxOutputBytes {
		return BlobChunk{}, fail(ErrTooLarge, "blob %s is %d bytes; the blob operation serves up to %d", req.Digest, ref.Size, wire.MaxOutputBytes)
	}
	if req.Offset > ref.Size {
		return BlobChunk{}, bad("offset %d is past the blob's end (%d bytes)", req.Offset, ref.Size)
	}
	content, err := a.refs.cache.get(ctx, name, ref.Digest, func(ctx context.Context) ([]byte, error) {
		return a.refs.fetch(ctx, name, ref)
	})
	if err != nil {
		return BlobChunk{}, fail(ErrUnavailable, "blob %s does not resolve: %v", name, err)
	}
	chunk := int64((s.replyBound(MaxEventsReplyBytes) - 256) / 4 * 3) // base64
	end := min(ref.Size, req.Offset+chunk)
	return BlobChunk{Data: append([]byte{}, content[req.Offset:end]...), Offset: req.Offset, Size: ref.Size, EOF: end == ref.Size}, nil
}
