package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// session.tagged: built from its typed body at data version 1, its data
// checked (ValidateTags), and round-tripped through the event codec.
func TestSessionTagged(t *testing.T) {
	checkNewKind(t, SessionTagged{Tags: map[string]string{"owner": "Zoë", "env": "prod", "note": ""}},
		`{"tags":{"env":"prod","note":"","owner":"Zoë"}}`,
		SessionTagged{Tags: map[string]string{"Env": "prod"}},
		SessionTagged{Tags: map[string]string{"": "prod"}},
		SessionTagged{Tags: map[string]string{"env": strings.Repeat("v", MaxTagValueBytes+1)}},
		SessionTagged{Tags: manyTags(MaxTags+1, "v")})
}

// The last tag removed: the resulting set is empty, written {} (also from
// a nil map), and accepted.
func TestSessionTaggedEmpty(t *testing.T) {
	for _, body := range []EventBody{SessionTagged{}, SessionTagged{Tags: map[string]string{}}, &SessionTagged{}} {
		checkNewKind(t, body, `{"tags":{}}`)
	}
	e, err := NewEvent(EventSessionTagged, SessionTagged{})
	if err != nil || string(e.Data) != `{"tags":{}}` {
		t.Fatalf("NewEvent: %s %v", e.Data, err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/session.tagged.v1.json"), []byte("\n"))
	ev, err := DecodeEvent(DefaultEvents(), b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeData[SessionTagged](ev)
	if err != nil || !SameTags(d.Tags, map[string]string{"env": "prod", "team.search": "retrieval-v2"}) {
		t.Fatalf("fixture data %+v, %v", d, err)
	}
	// encoding/json alone writes a nil map as null, which the kind refuses.
	raw, _ := json.Marshal(SessionTagged{})
	if err := DefaultEvents().ValidateData(EventSessionTagged, raw); err == nil {
		t.Errorf("%s accepted", raw)
	}
}
