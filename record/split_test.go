package record

import (
	"reflect"
	"strings"
	"testing"
)

// splitCases are session records as stored and as a fault, a test or a
// newer build could leave them: the checkpoint first, last, in between,
// with whitespace, twice, under a name that matches it but for case, not
// an object, with members this build does not know, broken.
var splitCases = []string{
	`{"sessionId":"s1","epoch":3,"state":"active","checkpoint":{"stateV":1,"history":[{"role":"user","text":"hi"}]}}`,
	`{"checkpoint":{"stateV":1},"sessionId":"s1","epoch":3}`,
	`{"checkpoint":{"stateV":1}}`,
	`{"sessionId":"s1","checkpoint":{"a":"}\"{"},"epoch":3}`,
	` { "sessionId" : "s1" , "checkpoint" : { "stateV" : 1 } , "epoch" : 3 } `,
	"{\n\t\"checkpoint\": {\"stateV\":1}\n\t,\n\"epoch\": 3\n}",
	`{"sessionId":"s1","checkpoint":{"stateV":1},"checkpoint":{"stateV":2}}`,
	`{"sessionId":"s1","Checkpoint":{"stateV":1}}`,
	`{"sessionId":"s1","checkpoint":{"stateV":1},"CHECKPOINT":{"stateV":2}}`,
	`{"sessionId":"s1","checkpoint":null}`,
	`{"sessionId":"s1","checkpoint":"x"}`,
	`{"sessionId":"s1","checkpoint":[1]}`,
	`{"sessionId":"s1"}`,
	`{"sessionId":"s1","checkpoint":{"stateV":1},"futureMember":{"x":[1,2]},"other":7}`,
	`{"futureMember":1,"checkpoint":{"stateV":1}}`,
	`{"sessionId":"s1","checkpoint":{"stateV":1}} trailing`,
	`{"sessionId":"s1","checkpoint":{"stateV":1}}{}`,
	`{"sessionId":"s1","checkpoint":{"stateV":1},}`,
	`{"sessionId":"s1","checkpoint":{"stateV":1}`,
	`{"sessionId":"s1",,"checkpoint":{"stateV":1}}`,
	`{"sessionId":1,"checkpoint":{"stateV":1}}`,
	`{"sessionId":"s\u00e9","checkpoint":{"t":"\ud83d\ude00 \u00e9"}}`,
	"{\"sessionId\":\"\xff\",\"checkpoint\":{\"t\":\"\xfe\"}}",
	`[]`,
	``,
	`null`,
}

// TestSplitCheckpointAgrees: a record read through splitCheckpoint decodes
// to exactly what encoding/json's whole decode gives, and fails exactly
// when it fails, with the same message.
func TestSplitCheckpointAgrees(t *testing.T) {
	split := 0
	for _, c := range splitCases {
		if _, _, ok := splitCheckpoint([]byte(c)); ok {
			split++
		}
		agreeSplit(t, []byte(c))
	}
	if split < 10 {
		t.Fatalf("only %d cases took the split path", split)
	}
	// A stored record, encoded by this build.
	r := SessionRecord{SessionID: "s1", DeploymentID: "v1", State: StateActive, Epoch: 2, Writer: "r1", WriteCounter: 4,
		Checkpoint: []byte(`{"stateV":9,"history":[{"role":"user","text":"` + strings.Repeat("é", 300) + `"}]}`)}
	b, err := EncodeSession(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := splitCheckpoint(b); !ok {
		t.Fatalf("an encoded record does not take the split path: %s", b)
	}
	agreeSplit(t, b)
	got, err := DecodeSession(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, r)
	}
}

func FuzzSplitCheckpoint(f *testing.F) {
	for _, c := range splitCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agreeSplit(t, data) })
}

func agreeSplit(t *testing.T, data []byte) {
	t.Helper()
	var want, got SessionRecord
	werr := decodeInto(data, (*sessionRecord)(&want), &want.Extra)
	gerr := got.UnmarshalJSON(data)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("%q: error %v, want %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded\n%+v\nwant\n%+v", data, got, want)
	}
}
