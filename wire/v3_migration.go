package wire

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Version 3 to 4: version 4 only adds (the kind terminate and its optional
// body terminate), so a version-3 document is a version-4 one once it is
// stamped "v":4. What version 3 could not say is rejected rather than
// lifted: a document that declares version 3 and uses the kind or the
// member of version 4 was never written by a version-3 producer.

// v4Kinds are the kinds version 4 added.
var v4Kinds = map[string]bool{"terminate": true}

// v4Members are the top-level members version 4 added.
var v4Members = []string{"terminate"}

func migrateV3(doc map[string]any) (map[string]any, error) {
	if k, _ := doc["kind"].(string); v4Kinds[k] {
		return nil, v3Reject(ErrUnknownKind, doc, "kind %q is not a version-3 kind (it needs version 4)", k)
	}
	for _, m := range v4Members {
		if _, ok := doc[m]; ok {
			return nil, v3Reject(ErrInvalid, doc, "member %q is not a version-3 member (it needs version 4)", m)
		}
	}
	out := maps.Clone(doc)
	out["v"] = json.Number("4")
	return out, nil
}

func v3Reject(sentinel error, doc map[string]any, format string, args ...any) *Error {
	e := &Error{Version: 3, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	e.Kind, _ = doc["kind"].(string)
	e.CommandID, _ = doc["id"].(string)
	return e
}
