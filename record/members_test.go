package record_test

import (
	"encoding/json"
	"testing"

	"github.com/baton-rt/baton/record"
)

// A record as a later build writes it: members this build does not know at
// the top and inside the quarantine, the retry target and the handoff.
const later = `{"sessionId":"01JAAAAAAAAAAAAAAAAAAAAAAA","ownerRunId":"r1","deploymentId":"v1",` +
	`"epoch":3,"ownerProcess":"p1","state":"active","consumer":"c","wireVersion":2,"writer":"r1","writeCounter":4,` +
	`"handoff":{"id":"h1","target":"v2","outcome":"failed","reason":{"code":"x"}},` +
	`"updatedAt":"2026-12-01T00:00:00Z","quarantine":{"attempts":1,"error":"e","since":"2026-12-01T00:00:00Z","deploymentId":"v1","hint":"h"},` +
	`"retry":{"deploymentId":"v2","priority":7},` +
	`"tags":{"team":"a b"},"agentId":"support","checkpoint":{"v":1}}`

// members decodes a JSON object's members.
func members(t *testing.T, data []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

// keeps checks that data holds the later build's members, unchanged.
func keeps(t *testing.T, what string, data []byte) {
	t.Helper()
	top := members(t, data)
	for name, want := range map[string]string{"tags": `{"team":"a b"}`, "agentId": `"support"`} {
		if got := string(top[name]); got != want {
			t.Errorf("%s: member %s = %s, want %s", what, name, got, want)
		}
	}
	if q, ok := top["quarantine"]; ok {
		if got := string(members(t, q)["hint"]); got != `"h"` {
			t.Errorf("%s: quarantine.hint = %s", what, got)
		}
	}
	if r, ok := top["retry"]; ok {
		if got := string(members(t, r)["priority"]); got != `7` {
			t.Errorf("%s: retry.priority = %s", what, got)
		}
	}
	if h, ok := top["handoff"]; ok {
		if got := string(members(t, h)["reason"]); got != `{"code":"x"}` {
			t.Errorf("%s: handoff.reason = %s", what, got)
		}
	}
}

// TestRecordKeepsUnknownMembers: a record decoded by this build and written
// again — unchanged, or through a transition — keeps every member a later
// build wrote, at the top and in the nested objects it carries over.
func TestRecordKeepsUnknownMembers(t *testing.T) {
	r, err := record.DecodeSession([]byte(later))
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch != 3 || r.Quarantine == nil || r.Quarantine.Attempts != 1 || r.Retry == nil || r.Retry.DeploymentID != "v2" {
		t.Fatalf("known members not decoded: %+v", r)
	}
	if m := r.Extra.Map(); len(m) != 2 || string(m["agentId"]) != `"support"` {
		t.Fatalf("Extra = %q", r.Extra)
	}
	data, err := record.EncodeSession(r)
	if err != nil {
		t.Fatal(err)
	}
	keeps(t, "re-encoded", data)
	// json.Unmarshal and json.Marshal go through the same methods.
	var viaJSON record.SessionRecord
	if err := json.Unmarshal([]byte(later), &viaJSON); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(viaJSON)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Fatalf("json.Marshal %s\nEncodeSession %s", again, data)
	}

	by := r.Ownership()
	committed, err := record.Commit(r, by, record.StateActive, 5, []byte(`{"v":2}`), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err = record.EncodeSession(committed)
	if err != nil {
		t.Fatal(err)
	}
	keeps(t, "after a commit", data)
	released, err := record.Release(committed, "r1")
	if err != nil {
		t.Fatal(err)
	}
	data, err = record.EncodeSession(released)
	if err != nil {
		t.Fatal(err)
	}
	keeps(t, "after a release", data)
}

// TestRecordWithoutUnknownMembers: a record with nothing unknown encodes
// exactly as before (no Extra, no trace of it), a member spelt in another
// case is decoded as encoding/json does rather than kept, and bad JSON is
// refused.
func TestRecordWithoutUnknownMembers(t *testing.T) {
	r := record.SessionRecord{SessionID: "01JAAAAAAAAAAAAAAAAAAAAAAA", DeploymentID: "v1", State: record.StateActive, Epoch: 1}
	data, err := record.EncodeSession(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeSession(data)
	if err != nil || back.Extra != "" || back.Epoch != 1 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	again, _ := record.EncodeSession(back)
	if string(again) != string(data) {
		t.Fatalf("round trip changed the record: %s → %s", data, again)
	}
	folded, err := record.DecodeSession([]byte(`{"SESSIONID":"x","epoch":2,"other":1}`))
	if err != nil || folded.SessionID != "x" || folded.Extra != `"other":1` {
		t.Fatalf("case-folded member: %+v %v", folded, err)
	}
	for _, bad := range []string{`{"epoch":"x"}`, `{"epoch":1} x`, `[1]`, `{`} {
		if _, err := record.DecodeSession([]byte(bad)); err == nil {
			t.Errorf("DecodeSession(%s): no error", bad)
		}
	}
}

// TestCheckpointWrittenVerbatim: the record writes an object checkpoint
// as it is, in encoding/json's place for it; any other value goes through
// encoding/json, which refuses one that is not JSON.
func TestCheckpointWrittenVerbatim(t *testing.T) {
	cp := json.RawMessage(`{"stateV":1,"history":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`)
	rec := record.SessionRecord{SessionID: "01JAAAAAAAAAAAAAAAAAAAAAAA", DeploymentID: "v1", State: record.StateActive,
		Epoch: 3, OwnerRunID: "r1", Writer: "r1", WriteCounter: 9, Checkpoint: cp}
	type plain record.SessionRecord // encoding/json's own encoding, for the bytes
	for _, extra := range []record.Members{"", `"later":{"x":1}`} {
		rec.Extra = extra
		got, err := record.EncodeSession(rec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(plain(rec))
		if err != nil {
			t.Fatal(err)
		}
		if extra != "" {
			want = append(append(want[:len(want)-1:len(want)-1], ","+string(extra)...), '}')
		}
		if string(got) != string(want) {
			t.Fatalf("encoded\n%s\nwant\n%s", got, want)
		}
		back, err := record.DecodeSession(got)
		if err != nil || string(back.Checkpoint) != string(cp) || back.Extra != extra {
			t.Fatalf("round trip: %v %s %q", err, back.Checkpoint, back.Extra)
		}
	}
	rec.Extra = ""
	for raw, want := range map[string]string{`"not a checkpoint"`: `"not a checkpoint"`, `[1, 2]`: `[1,2]`, `{}`: `{}`} {
		rec.Checkpoint = json.RawMessage(raw)
		got, err := record.EncodeSession(rec)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", raw, err)
		}
		back, err := record.DecodeSession(got)
		if err != nil || string(back.Checkpoint) != want {
			t.Fatalf("checkpoint %s: read back %s, %v", raw, back.Checkpoint, err)
		}
	}
	for _, bad := range []string{`[1`, `{"a":1`, `nope`} {
		rec.Checkpoint = json.RawMessage(bad)
		if _, err := record.EncodeSession(rec); err == nil {
			t.Fatalf("checkpoint %s encoded", bad)
		}
	}
}
