package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

func (t *Topology) ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, want)
		if err == nil {
			t.Changes = append(t.Changes, "created bucket "+want.Bucket)
			return kv, nil
		}
		if !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, fmt.Errorf("topology: create bucket %s: %w", want.Bucket, err)
		}
		kv, err = js.KeyValue(ctx, want.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: bucket %s: %w", want.Bucket, err)
	}
	return t.reconcileBucket(ctx, js, kv, want)
}

func (t *Topology) reconcileBucket(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("topology: bucket %s status: %w", want.Bucket, err)
	}
	have := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if have.Storage != want.Storage {
		return nil, &IncompatibleError{Resource: want.Bucket, Field: "storage", Have: have.Storage.String(), Want: want.Storage.String()}
	}
	diff := bucketDifferences(have, want)
	if len(diff) == 0 {
		return kv, nil
	}
	kv, err = js.UpdateKeyValue(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("topology: update bucket %s (%v): %w", want.Bucket, diff, err)
	}
	t.Changes = append(t.Changes, fmt.Sprintf("updated bucket %s: %v", want.Bucket, diff))
	return kv, nil
}

func bucketDifferences(have jetstream.StreamConfig, want jetstream.KeyValueConfig) []string {
	var d []string
	add := func(name string, differ bool) {
		if differ {
			d = append(d, name)
		}
	}
	add("history", have.MaxMsgsPerSubject != int64(want.History))
	add("max_value_size", have.MaxMsgSize != want.MaxValueSize)
	add("replicas", have.Replicas != want.Replicas)
	add("limit_marker_ttl", have.SubjectDeleteMarkerTTL != want.LimitMarkerTTL)
	add("description", have.Description != want.Description)
	return d
}

func (t *Topology) ensureObjects(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, want)
		if err == nil {
			t.Changes = append(t.Changes, "created object store "+want.Bucket)
			return obs, nil
		}
		if !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, fmt.Errorf("topology: create object store %s: %w", want.Bucket, err)
		}
		obs, err = js.ObjectStore(ctx, want.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: object store %s: %w", want.Bucket, err)
	}
	return obs, nil
}
