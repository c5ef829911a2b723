package wire

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Version 2 to 3: version 3 only adds (the kind tag and its body tag), so
// a version-2 document is a version-3 one once it is stamped "v":3. What
// version 2 could not say is rejected rather than lifted: a document that
// declares version 2 and uses the kind or the member of version 3 was
// never written by a version-2 producer.

// v3Kinds are the kinds version 3 added.
var v3Kinds = map[string]bool{"tag": true}

// v3Members are the top-level members version 3 added.
var v3Members = []string{"tag"}

func migrateV2(doc map[string]any) (map[string]any, error) {
	if k, _ := doc["kind"].(string); v3Kinds[k] {
		return nil, v2Reject(ErrUnknownKind, doc, "kind %q is not a version-2 kind (it needs version 3)", k)
	}
	for _, m := range v3Members {
		if _, ok := doc[m]; ok {
			return nil, v2Reject(ErrInvalid, doc, "member %q is not a version-2 member (it needs version 3)", m)
		}
	}
	out := maps.Clone(doc)
	out["v"] = json.Number("3")
	return out, nil
}

func v2Reject(sentinel error, doc map[string]any, format string, args ...any) *Error {
	e := &Error{Version: 2, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	e.Kind, _ = doc["kind"].(string)
	e.CommandID, _ = doc["id"].(string)
	return e
}
