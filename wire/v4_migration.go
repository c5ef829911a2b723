package wire

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Version 4 to 5: version 5 only adds (the kind configure and its body
// configure; a delivery's busy modes reject, interrupt, rollback, debounce
// and latest, its debounceMs, and a delivery without a mode), so a
// version-4 document is a version-5 one once it is stamped "v":5. What
// version 4 could not say is rejected rather than lifted: a document that
// declares version 4 and uses the kind, the member or a mode of version 5
// was never written by a version-4 producer — nor was a delivery without
// a mode, which version 4 requires (version 5 reads it as the session's
// default mode, a different meaning).

// v5Kinds are the kinds version 5 added.
var v5Kinds = map[string]bool{"configure": true}

// v5Members are the top-level members version 5 added.
var v5Members = []string{"configure"}

// v4Modes are the delivery modes of versions 1 to 4.
var v4Modes = map[string]bool{"queue": true, "steer": true}

func migrateV4(doc map[string]any) (map[string]any, error) {
	if k, _ := doc["kind"].(string); v5Kinds[k] {
		return nil, v4Reject(ErrUnknownKind, doc, "kind %q is not a version-4 kind (it needs version 5)", k)
	}
	for _, m := range v5Members {
		if _, ok := doc[m]; ok {
			return nil, v4Reject(ErrInvalid, doc, "member %q is not a version-4 member (it needs version 5)", m)
		}
	}
	if d, ok := doc["deliver"].(map[string]any); ok {
		if _, ok := d["debounceMs"]; ok {
			return nil, v4Reject(ErrInvalid, doc, "member deliver.debounceMs is not a version-4 member (it needs version 5)")
		}
		mode, present := d["mode"]
		if !present {
			return nil, v4Reject(ErrInvalid, doc, "deliver.mode is required at version 4 (a delivery without a mode needs version 5)")
		}
		if m, ok := mode.(string); ok && m != "" && !v4Modes[m] {
			return nil, v4Reject(ErrInvalid, doc, "deliver.mode %q is not a version-4 mode (it needs version 5)", m)
		}
	}
	out := maps.Clone(doc)
	out["v"] = json.Number("5")
	return out, nil
}

func v4Reject(sentinel error, doc map[string]any, format string, args ...any) *Error {
	e := &Error{Version: 4, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	e.Kind, _ = doc["kind"].(string)
	e.CommandID, _ = doc["id"].(string)
	return e
}
