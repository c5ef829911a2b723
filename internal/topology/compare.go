package topology

import (
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// immutable checks the fields JetStream cannot change in place.
func immutable(have, want jetstream.StreamConfig) error {
	if have.Retention != want.Retention {
		return &IncompatibleError{Resource: want.Name, Field: "retention", Have: have.Retention.String(), Want: want.Retention.String()}
	}
	if have.Storage != want.Storage {
		return &IncompatibleError{Resource: want.Name, Field: "storage", Have: have.Storage.String(), Want: want.Storage.String()}
	}
	return nil
}

// differences lists the settable fields in which have differs from want.
func differences(have, want jetstream.StreamConfig) []string {
	var d []string
	add := func(name string, differ bool) {
		if differ {
			d = append(d, name)
		}
	}
	add("subjects", !sameSet(have.Subjects, want.Subjects))
	add("max_consumers", have.MaxConsumers != want.MaxConsumers)
	add("max_msg_size", have.MaxMsgSize != want.MaxMsgSize)
	add("max_msgs_per_subject", have.MaxMsgsPerSubject != want.MaxMsgsPerSubject)
	add("max_age", have.MaxAge != want.MaxAge)
	add("duplicate_window", have.Duplicates != want.Duplicates)
	add("num_replicas", have.Replicas != want.Replicas)
	add("allow_direct", have.AllowDirect != want.AllowDirect)
	add("allow_rollup_hdrs", have.AllowRollup != want.AllowRollup)
	add("allow_msg_ttl", have.AllowMsgTTL != want.AllowMsgTTL)
	add("allow_msg_schedules", have.AllowMsgSchedules != want.AllowMsgSchedules)
	add("allow_batched", have.AllowBatchPublish != want.AllowBatchPublish)
	add("subject_delete_marker_ttl", have.SubjectDeleteMarkerTTL != want.SubjectDeleteMarkerTTL)
	add("discard", have.Discard != want.Discard)
	add("description", have.Description != want.Description)
	return d
}

// merge applies want's settable fields to have, keeping what Baton does not
// manage (placement, metadata, an operator's extra subjects).
func merge(have, want jetstream.StreamConfig) jetstream.StreamConfig {
	out := have
	out.Subjects = want.Subjects
	out.MaxConsumers = want.MaxConsumers
	out.MaxMsgSize = want.MaxMsgSize
	out.MaxMsgsPerSubject = want.MaxMsgsPerSubject
	out.MaxAge = want.MaxAge
	out.Duplicates = want.Duplicates
	out.Replicas = want.Replicas
	out.AllowDirect = want.AllowDirect
	out.AllowRollup = want.AllowRollup
	out.AllowMsgTTL = want.AllowMsgTTL
	out.AllowMsgSchedules = want.AllowMsgSchedules
	out.AllowBatchPublish = want.AllowBatchPublish
	out.SubjectDeleteMarkerTTL = want.SubjectDeleteMarkerTTL
	out.Discard = want.Discard
	out.Description = want.Description
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
