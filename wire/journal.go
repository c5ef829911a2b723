package wire

import (
	"encoding/json"
	"fmt"
)

// JournalEntry is one journaled call of a step (runtime.StepInput.Do), the
// value of its key in the journal bucket. It is durable: an owner of a
// newer build may replay what an older one recorded mid-step, and the
// other way round during a rollback, so it only grows, with optional
// members (VERSIONING rules; V is 1).
type JournalEntry struct {
	V int `json:"v"`
	// Name is the call's name; Digest the digest of the StepInput of the
	// run that recorded it (a re-run with other inputs starts afresh).
	Name   string `json:"name"`
	Digest string `json:"digest"`
	// Result is the call's result inline, or ResultRef the blob of a
	// result over MaxJournalInline; Error the message of the call's final
	// error (then there is no result).
	Result    []byte   `json:"result,omitempty"`
	ResultRef *BlobRef `json:"resultRef,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// MaxJournalInline bounds a result stored inside its journal entry.
const MaxJournalInline = 32 << 10

// DecodeJournalEntry decodes and checks an entry: version 1, a name and a
// digest, at most one of a result ref and an error.
func DecodeJournalEntry(data []byte) (JournalEntry, error) {
	var e JournalEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return JournalEntry{}, fmt.Errorf("%w: journal entry: %v", ErrInvalid, err)
	}
	switch {
	case e.V != 1:
		return JournalEntry{}, fmt.Errorf("%w: journal entry version %d (this build reads 1)", ErrUnknownVersion, e.V)
	case e.Name == "" || e.Digest == "":
		return JournalEntry{}, fmt.Errorf("%w: journal entry without name or digest", ErrInvalid)
	case e.Error != "" && (e.Result != nil || e.ResultRef != nil):
		return JournalEntry{}, fmt.Errorf("%w: journal entry with both a result and an error", ErrInvalid)
	}
	return e, nil
}
