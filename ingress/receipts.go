package ingress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Idempotency.
//
// A request with an idempotencyKey gets the command ID idemID(key) and the
// JetStream message ID <sessionID>/<commandID>: the session is the resolved
// one, so the same key on two sessions never collides, and an alias and its
// session ID (same resolved session) are the same target. Within the inbox's
// duplicate window a repeat is acknowledged as a duplicate with the first
// message's sequence, and nothing new is stored; after it the owner still
// drops the repeat by its command ID (the applied-ID record).
//
// `created` cannot be read back from the stream (the owner purges processed
// commands within seconds), so the first receipt is remembered: before the
// publish, the request writes {created, deploymentId} create-only under
// <sessionID>.<commandID> in the KV bucket <prefix>_receipts, whose TTL
// outlives the duplicate window. A repeat (or a concurrent twin) finds the
// key taken and answers with the stored values; seq comes from the PubAck.
// The write precedes the publish, so a receipt exists for every command a
// repeat can be told about; a request that fails after the write leaves
// only a receipt that expires.
//
// A receipt also holds the digest of its command (commandDigest), so a key
// reused for a different command — other text, payloads, mode, caller,
// input value, authorization result — is refused (409
// idempotency_conflict) instead of silently answered with the first
// receipt. That holds for the receipt's lifetime (the TTL); a receipt
// written by an ingress that stored no digest matches any command.

// receiptMargin is added to the inbox duplicate window for the receipts TTL.
const receiptMargin = time.Minute

// receipt is the remembered part of a first answer.
type receipt struct {
	Created      bool   `json:"created"`
	DeploymentID string `json:"deploymentId"`
	// Digest is the first command's commandDigest; optional (an older
	// ingress wrote none).
	Digest string `json:"digest,omitempty"`
}

// matches reports whether a command of digest repeats the receipt's.
func (r receipt) matches(digest string) bool { return r.Digest == "" || r.Digest == digest }

type receipts struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	bucket string
	ttl    time.Duration // how long a receipt lives (the bucket's TTL)
}

// ReceiptsBucket is the KV bucket of idempotency receipts under names.
func ReceiptsBucket(names subjects.Names) string { return names.ReceiptsBucket() }

// openReceipts opens, or creates, the receipts bucket: TTL = the inbox
// duplicate window plus a margin, one revision per key, the inbox's storage
// replicas.
func openReceipts(ctx context.Context, js jetstream.JetStream, names subjects.Names, inbox jetstream.StreamConfig) (*receipts, error) {
	name := ReceiptsBucket(names)
	h, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		h, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "Baton ingress idempotency receipts (created flag of the first answer)",
			TTL: inbox.Duplicates + receiptMargin, History: 1, MaxValueSize: 1 << 10,
			Storage: jetstream.FileStorage, Replicas: max(inbox.Replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			h, err = js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("receipts bucket %s: %w", name, err)
	}
	ttl := inbox.Duplicates + receiptMargin
	if st, err := h.Status(ctx); err == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	return &receipts{kv: h, js: js, bucket: name, ttl: ttl}, nil
}

// claim stores r as the receipt of (sessionID, commandID) unless one is
// there, and returns the receipt that holds: ours or the first one.
func (rc *receipts) claim(ctx context.Context, sessionID, commandID string, r receipt) (receipt, error) {
	key := sessionID + "." + commandID
	data, _ := json.Marshal(r)
	_, err := rc.kv.Create(ctx, key, data)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return receipt{}, fmt.Errorf("receipt %s: %w", key, err)
	}
	value, _, err := kv.LeaderGet(ctx, rc.js, rc.bucket, key)
	if err != nil {
		return receipt{}, fmt.Errorf("receipt %s: %w", key, err)
	}
	var first receipt
	if err := json.Unmarshal(value, &first); err != nil {
		return receipt{}, fmt.Errorf("receipt %s: %w", key, err)
	}
	return first, nil
}

// has reports whether (sessionID, commandID) has a receipt. Both reads
// are leader reads: on a cluster a direct get may be answered by a replica
// that has not applied the receipt written a moment ago (a repeat would
// then fail, or a known request ID look unknown).
func (rc *receipts) has(ctx context.Context, sessionID, commandID string) (bool, error) {
	key := sessionID + "." + commandID
	_, _, err := kv.LeaderGet(ctx, rc.js, rc.bucket, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, record.ErrNotFound):
		return false, nil
	}
	return false, fail(ErrUnavailable, "receipt %s: %v", key, err)
}

// commandDigest identifies what a command asks for, whoever stamped it and
// whenever: the SHA-256 of its canonical JSON (members sorted, whitespace
// dropped) without ID, version, stamp and acceptance time.
func commandDigest(c wire.Command) string {
	c.ID, c.V, c.AcceptedDeploymentID, c.AcceptedAt = "", 0, "", time.Time{}
	b, _ := json.Marshal(c)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		b, _ = json.Marshal(v) // maps marshal with sorted keys
	}
	sum := sha256.Sum256(b)
	return idemEncoding.EncodeToString(sum[:])
}

var idemEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// idemID is the command ID of a request with an idempotency key: "k"
// followed by 32 base32 characters of SHA-256(key). It is token- and
// KV-key-safe and never collides with a ULID (26 characters).
func idemID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "k" + idemEncoding.EncodeToString(sum[:20])
}
