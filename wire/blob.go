package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// BlobRef references content stored out of line (an object store), by
// content digest: history and authored state that would not fit a KV
// record, or event content larger than MaxEventDataBytes. The object-store
// I/O belongs to the caller.
type BlobRef struct {
	// Digest is "sha256:" followed by 64 lower-case hex digits.
	Digest string `json:"digest" jsonschema:"pattern=^sha256:[0-9a-f]+$,minLength=71,maxLength=71"`
	Size   int64  `json:"size" jsonschema:"minimum=0"`
}

// digestPrefix begins every digest.
const digestPrefix = "sha256:"

// validDigest reports "sha256:" followed by 64 lower-case hex digits. A
// checkpoint validates every history segment's reference on each commit
// (a session that lived for days holds hundreds): a loop, not a regexp.
func validDigest(d string) bool {
	if len(d) != len(digestPrefix)+64 || d[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NewBlobRef computes the reference of b.
func NewBlobRef(b []byte) BlobRef {
	return BlobRef{Digest: Digest(b), Size: int64(len(b))}
}

// Digest returns "sha256:<hex>" of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Validate checks the reference's form.
func (r BlobRef) Validate() error {
	if !validDigest(r.Digest) || r.Size < 0 {
		return fmt.Errorf("%w: blob reference %q/%d", ErrInvalid, r.Digest, r.Size)
	}
	return nil
}

// Verify checks that b is the referenced content.
func (r BlobRef) Verify(b []byte) error {
	if int64(len(b)) != r.Size || Digest(b) != r.Digest {
		return fmt.Errorf("%w: want %s (%d bytes), got %s (%d bytes)", ErrDigestMismatch, r.Digest, r.Size, Digest(b), len(b))
	}
	return nil
}

// BlobName is the object-store name of a session's blob: agent state, event
// content or a delivery's text stored out of line, "<sessionID>/<digest>",
// so no two sessions share an object and a session's blobs list together.
// (History segments keep their bare digest names, which older owners look
// up.)
func BlobName(sessionID string, ref BlobRef) string { return sessionID + "/" + ref.Digest }
