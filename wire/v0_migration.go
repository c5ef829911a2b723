package wire

import (
	"encoding/json"
	"fmt"
)

// Version 0 is the unversioned era: payloads with no "v". Baton never
// produces it; this pure transform lifts its two historic shapes to v1 and
// rejects anything else. It depends on nothing but the sentinels.
//
// The legacy deliver envelope:
//
//	{"type":"deliver","commandId":"…","deploymentId":"…","receivedAt":"RFC 3339",
//	 "mode":"queue"|"steer" (optional, default queue),
//	 "caller":"…","idempotencyKey":"…" (optional),
//	 "payloads":[{ "message", "context", "inputResponses", "outputSchema",
//	               …loose channel-adapter fields }]}
//
// The raw send command (one bare message):
//
//	{"message": "text" | [parts], "context": [...] (optional),
//	 "commandId":"…","deploymentId":"…","receivedAt":"…","caller":"…" (optional)}
//
// Loose adapter fields of a legacy payload move into the payload's "ext".
// A document with a "kind" but no "v" is neither shape and is rejected: a
// versioned payload never falls through to a legacy interpretation.

// v0 envelope fields and their v1 names.
var v0Envelope = map[string]string{
	"commandId": "id", "deploymentId": "acceptedDeploymentId", "receivedAt": "acceptedAt",
	"caller": "caller", "idempotencyKey": "idempotencyKey",
}

// v0 payload fields that v1 declares; every other payload field is an
// adapter field.
var v0PayloadFields = map[string]bool{
	"message": true, "context": true, "inputResponses": true, "outputSchema": true,
}

func migrateV0(doc map[string]any) (map[string]any, error) {
	if _, ok := doc["kind"]; ok {
		return nil, v0Reject(ErrInvalid, doc, "a payload with a kind but no v is not a version-0 shape")
	}
	t, hasType := doc["type"]
	switch {
	case hasType && t == "deliver":
		return migrateV0Deliver(doc)
	case hasType:
		return nil, v0Reject(ErrUnknownKind, doc, "legacy type %v", t)
	case doc["message"] != nil:
		return migrateV0Send(doc)
	}
	return nil, v0Reject(ErrInvalid, doc, "neither a legacy deliver envelope nor a raw send")
}

func migrateV0Deliver(doc map[string]any) (map[string]any, error) {
	out, err := v0Lift(doc, "deliver", "type", "mode", "payloads")
	if err != nil {
		return nil, err
	}
	list, ok := doc["payloads"].([]any)
	if !ok {
		return nil, v0Reject(ErrInvalid, doc, "payloads must be an array")
	}
	payloads := make([]any, len(list))
	for i, p := range list {
		obj, ok := p.(map[string]any)
		if !ok {
			return nil, v0Reject(ErrInvalid, doc, "payload %d is not an object", i)
		}
		payloads[i] = v0Payload(obj)
	}
	mode, ok := doc["mode"]
	if !ok {
		mode = ModeQueue
	}
	out["deliver"] = map[string]any{"mode": mode, "payloads": payloads}
	return out, nil
}

func migrateV0Send(doc map[string]any) (map[string]any, error) {
	out, err := v0Lift(doc, "send", "message", "context")
	if err != nil {
		return nil, err
	}
	payload := map[string]any{"message": doc["message"]}
	if c, ok := doc["context"]; ok {
		payload["context"] = c
	}
	out["deliver"] = map[string]any{"mode": ModeQueue, "payloads": []any{payload}}
	return out, nil
}

// v0Lift builds the v1 envelope from the legacy envelope fields, rejecting
// any top-level field that is neither an envelope field nor one of body.
func v0Lift(doc map[string]any, shape string, body ...string) (map[string]any, error) {
	known := map[string]bool{}
	for _, f := range body {
		known[f] = true
	}
	out := map[string]any{"v": json.Number("1"), "kind": string(KindDeliver)}
	for k, v := range doc {
		switch to, ok := v0Envelope[k]; {
		case ok:
			out[to] = v
		case !known[k]:
			return nil, v0Reject(ErrInvalid, doc, "legacy %s has unknown field %q", shape, k)
		}
	}
	for _, f := range []string{"commandId", "deploymentId", "receivedAt"} {
		if s, ok := doc[f].(string); !ok || s == "" {
			return nil, v0Reject(ErrInvalid, doc, "legacy %s needs %s", shape, f)
		}
	}
	return out, nil
}

// v0Payload keeps the declared payload fields and moves the rest into ext.
func v0Payload(p map[string]any) map[string]any {
	out := map[string]any{}
	ext := map[string]any{}
	for k, v := range p {
		if v0PayloadFields[k] {
			out[k] = v
		} else {
			ext[k] = v
		}
	}
	if len(ext) > 0 {
		out["ext"] = ext
	}
	return out
}

func v0Reject(sentinel error, doc map[string]any, format string, args ...any) *Error {
	e := &Error{Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	e.CommandID, _ = doc["commandId"].(string)
	if t, ok := doc["type"].(string); ok {
		e.Kind = t
	} else if _, ok := doc["message"]; ok {
		e.Kind = "send"
	}
	return e
}
