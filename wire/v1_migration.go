package wire

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Version 1 to 2: version 2 only adds (the kinds child.result,
// child.waiting, child.resumed and end; the envelope members
// parentSessionId, handle and depth; the bodies childResult, childWaiting
// and childResumed), so a version-1 document is a version-2 one once it
// is stamped "v":2. What version 1 could not say is rejected rather than
// lifted: a document that declares version 1 and uses a kind or a member
// of version 2 was never written by a version-1 producer.

// v2Kinds are the kinds version 2 added.
var v2Kinds = map[string]bool{
	"child.result": true, "child.waiting": true, "child.resumed": true, "end": true,
}

// v2Members are the top-level members version 2 added.
var v2Members = []string{
	"parentSessionId", "handle", "depth", "childResult", "childWaiting", "childResumed",
}

func migrateV1(doc map[string]any) (map[string]any, error) {
	if k, _ := doc["kind"].(string); v2Kinds[k] {
		return nil, v1Reject(ErrUnknownKind, doc, "kind %q is not a version-1 kind (it needs version 2)", k)
	}
	for _, m := range v2Members {
		if _, ok := doc[m]; ok {
			return nil, v1Reject(ErrInvalid, doc, "member %q is not a version-1 member (it needs version 2)", m)
		}
	}
	out := maps.Clone(doc)
	out["v"] = json.Number("2")
	return out, nil
}

func v1Reject(sentinel error, doc map[string]any, format string, args ...any) *Error {
	e := &Error{Version: 1, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	e.Kind, _ = doc["kind"].(string)
	e.CommandID, _ = doc["id"].(string)
	return e
}
