package protocol_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/baton-rt/baton/protocol"
)

// The files in testdata/ are the bytes the builds before this package sent
// (captured from the owner's and the ingress's own types). They are frozen:
// never regenerated, never edited; a new shape adds a file. Each must decode
// to the value below and encode back to the same bytes, so an old reader
// understands what this build sends and this build reads what an old one
// sent.
const (
	sid = "01JABCDEFGHJKMNPQRSTVWXYZ0"
	hid = "01JHANDOFF000000000000000A"
	run = "01JRUN0000000000000000000B"
)

var fixtures = []struct {
	file string
	want any
}{
	{"start_request.json", protocol.StartRequest{DeploymentID: "green", Aliases: []string{"support:ticket-42", "email:a@b.example"}, Timeout: "1h30m"}},
	{"start_request_minimal.json", protocol.StartRequest{DeploymentID: "green"}},
	{"start_reply_created.json", protocol.StartReply{SessionID: sid, DeploymentID: "green", Created: true, WireV: 1}},
	{"start_reply_holder.json", protocol.StartReply{SessionID: sid, DeploymentID: "green", Ended: true, WireV: 1}},
	{"start_reply_error.json", protocol.StartReply{Error: &protocol.ReplyError{Code: protocol.CodeUnavailable, Message: "driver: fenced"}}},
	{"handoff_start.json", protocol.HandoffStart{DeploymentID: "blue", HandoffID: hid, SessionID: sid, ExpectedRevision: 42}},
	{"handoff_start_reply_activated.json", protocol.HandoffStartReply{Activated: true, HandoffID: hid, SessionID: sid, DeploymentID: "blue", OwnerRunID: run, Epoch: 3}},
	{"handoff_start_reply_replayed.json", protocol.HandoffStartReply{Activated: true, Replayed: true, HandoffID: hid, SessionID: sid, DeploymentID: "blue", OwnerRunID: run, Epoch: 3}},
	{"handoff_start_reply_error.json", protocol.HandoffStartReply{HandoffID: hid, SessionID: sid, DeploymentID: "blue",
		Error: &protocol.ReplyError{Code: protocol.CodeUncertain, Message: "handoff: uncertain: claim timed out"}}},
	{"wake_request.json", protocol.WakeRequest{SessionID: sid, From: "p-dead", Source: protocol.WakeTakeover, Forwarded: true}},
	{"wake_request_minimal.json", protocol.WakeRequest{SessionID: sid}},
	{"wake_request_ingress.json", protocol.WakeRequest{SessionID: sid, Source: protocol.WakeIngress}},
	{"wake_reply_loaded.json", protocol.WakeReply{SessionID: sid, Outcome: protocol.WakeLoaded, ProcessID: "p1"}},
	{"wake_reply_quarantined.json", protocol.WakeReply{SessionID: sid, Outcome: protocol.WakeQuarantined}},
	{"wake_reply_deferred.json", protocol.WakeReply{SessionID: sid, Outcome: protocol.WakeDeferred, ProcessID: "p1"}},
	{"wake_reply_error.json", protocol.WakeReply{SessionID: sid, Error: &protocol.ReplyError{Code: protocol.CodeAtCapacity, Message: "driver: at capacity"}}},
	{"finish_request.json", protocol.FinishRequest{SessionID: sid}},
	{"finish_reply_ended.json", protocol.FinishReply{SessionID: sid, Outcome: protocol.FinishEnded, DeploymentID: "v1", EventSeq: 11, Revision: 9,
		Tombstoned: []string{sid, "ticket-7"}, ChildrenEnded: []string{sid + "-h1-1"}, How: "machine"}},
	{"finish_reply_retried.json", protocol.FinishReply{SessionID: sid, Outcome: protocol.FinishRetried, DeploymentID: "v2", FromDeploymentID: "v1",
		Force: true, EventSeq: 9, Revision: 20, WakeOutcome: "loaded", WakeProcess: "p2"}},
	{"finish_reply_deleted.json", protocol.FinishReply{SessionID: sid, Outcome: protocol.FinishDeleted, DeploymentID: "v1", Revision: 12,
		Removed: &protocol.Removed{Events: 301, Blobs: 14, Bytes: 1 << 20}, ChildrenDeleted: []string{"01JABCDEFGHJKMNPQRSTVWXYZ1"}}},
	{"finish_reply_error.json", protocol.FinishReply{SessionID: sid, Error: &protocol.ReplyError{Code: protocol.CodeRefused, Message: "session has no pending finish (ended)"}}},
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(data, []byte("\n"))
}

// TestFrozenBytes: every fixture decodes to its value and that value
// encodes to the fixture's bytes.
func TestFrozenBytes(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.file, func(t *testing.T) {
			data := readFixture(t, f.file)
			got := reflect.New(reflect.TypeOf(f.want))
			if err := json.Unmarshal(data, got.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Elem().Interface(), f.want) {
				t.Fatalf("decoded %+v, want %+v", got.Elem().Interface(), f.want)
			}
			enc, err := json.Marshal(f.want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("encoded\n%s\nwant the frozen\n%s", enc, data)
			}
		})
	}
}

// TestFrozenDispatch: the frozen start bodies keep their kind.
func TestFrozenDispatch(t *testing.T) {
	for _, f := range fixtures {
		var want protocol.Start
		switch v := f.want.(type) {
		case protocol.StartRequest:
			want = protocol.Start{Kind: protocol.StartSession, Session: v}
		case protocol.HandoffStart:
			want = protocol.Start{Kind: protocol.StartHandoff, Handoff: v}
		default:
			continue
		}
		got, err := protocol.DecodeStart(readFixture(t, f.file))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %v, want %+v", f.file, got, err, want)
		}
	}
}

// TestFrozenFinishes: the frozen finish request decodes with DecodeFinish.
func TestFrozenFinishes(t *testing.T) {
	for _, f := range fixtures {
		want, ok := f.want.(protocol.FinishRequest)
		if !ok {
			continue
		}
		if got, err := protocol.DecodeFinish(readFixture(t, f.file)); err != nil || got != want {
			t.Errorf("%s: %+v %v", f.file, got, err)
		}
	}
	if _, err := protocol.DecodeFinish([]byte(`{"sessionId":`)); err == nil {
		t.Error("a broken finish request decoded")
	}
}

// TestFrozenWakes: the frozen wake bodies decode with DecodeWake.
func TestFrozenWakes(t *testing.T) {
	for _, f := range fixtures {
		want, ok := f.want.(protocol.WakeRequest)
		if !ok {
			continue
		}
		if got, err := protocol.DecodeWake(readFixture(t, f.file)); err != nil || got != want {
			t.Errorf("%s: %+v %v", f.file, got, err)
		}
	}
}
