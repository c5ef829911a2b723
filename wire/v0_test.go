package wire

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Version 0 contract: every frozen legacy fixture decodes through the 0→1
// migration to its frozen expected normalization (<name>.want.json, the
// canonical v1 encoding). Fixtures are never regenerated.
func TestV0Fixtures(t *testing.T) {
	paths := fixtures(t, 0)
	for _, want := range []string{"deliver.json", "send.json"} {
		if !containsBase(paths, want) {
			t.Errorf("missing v0 fixture %s", want)
		}
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c, err := Decode(readFile(t, path))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if c.V != CurrentVersion || c.Kind != KindDeliver {
				t.Fatalf("decoded %+v", c)
			}
			want := readFile(t, strings.TrimSuffix(path, ".json")+".want.json")
			wantCmd, err := Decode(want)
			if err != nil || !reflect.DeepEqual(wantCmd, c) {
				t.Fatalf("fixture and its normalization decode differently: %v\n got %+v\nwant %+v", err, c, wantCmd)
			}
			// The normalization is pinned at the version it declares.
			doc, _ := parseObject(want)
			v, _ := versionOf(doc)
			out, err := Encode(Capability{V: v}, c)
			if err != nil {
				t.Fatalf("encode v%d: %v", v, err)
			}
			if want := bytes.TrimRight(want, "\n"); !bytes.Equal(out, want) {
				t.Fatalf("normalization changed:\n got %s\nwant %s", out, want)
			}
		})
	}
}

func containsBase(paths []string, base string) bool {
	for _, p := range paths {
		if filepath.Base(p) == base {
			return true
		}
	}
	return false
}

// The adapter fields of a legacy payload land in ext, and a send becomes a
// queued delivery of one payload.
func TestV0Migration(t *testing.T) {
	c, err := Decode(readFile(t, "testdata/v0/deliver.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Deliver.Payloads[0]
	if string(p.Ext["slackChannel"]) != `"C123"` || c.Deliver.Mode != ModeQueue || c.Text() == "" {
		t.Fatalf("deliver migrated to %+v", c)
	}
	s, err := Decode(readFile(t, "testdata/v0/send.json"))
	if err != nil || s.Text() != "hello" || s.ID != "cmd-legacy-0002" || s.AcceptedDeploymentID != "dep-2025-10-01" {
		t.Fatalf("send migrated to %+v (%v)", s, err)
	}
}

// The migration decodes defensively: anything but the two shapes is a typed
// error, and a versioned-looking payload without v is never reinterpreted.
// v0RejectCases are legacy payloads Decode rejects (also part of the
// corpus of TestSchemaAgreement).
var v0RejectCases = func() []struct {
	name string
	in   string
	want error
	kind string
} {
	const env = `"commandId":"c","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z"`
	return []struct {
		name string
		in   string
		want error
		kind string
	}{
		{"kind without v", `{"kind":"deliver","id":"c","acceptedDeploymentId":"d","acceptedAt":"2025-01-01T00:00:00Z","deliver":{"mode":"queue","payloads":[{"message":"x"}]}}`, ErrInvalid, "deliver"},
		{"unknown legacy type", `{"type":"cancel",` + env + `}`, ErrUnknownKind, "cancel"},
		{"non-string type", `{"type":7,` + env + `}`, ErrUnknownKind, ""},
		{"neither shape", `{` + env + `}`, ErrInvalid, ""},
		{"empty object", `{}`, ErrInvalid, ""},
		{"null message", `{"message":null,` + env + `}`, ErrInvalid, "send"},
		{"missing commandId", `{"message":"x","deploymentId":"d","receivedAt":"2025-01-01T00:00:00Z"}`, ErrInvalid, "send"},
		{"missing deployment", `{"type":"deliver","commandId":"c","receivedAt":"2025-01-01T00:00:00Z","payloads":[{"message":"x"}]}`, ErrInvalid, "deliver"},
		{"latest deployment", `{"message":"x","commandId":"c","deploymentId":"latest","receivedAt":"2025-01-01T00:00:00Z"}`, ErrInvalid, "deliver"},
		{"unknown send field", `{"message":"x","mode":"steer",` + env + `}`, ErrInvalid, "send"},
		{"unknown deliver field", `{"type":"deliver","payloads":[{"message":"x"}],"extra":1,` + env + `}`, ErrInvalid, "deliver"},
		{"payloads not array", `{"type":"deliver","payloads":{"message":"x"},` + env + `}`, ErrInvalid, "deliver"},
		{"payload not object", `{"type":"deliver","payloads":["x"],` + env + `}`, ErrInvalid, "deliver"},
		{"empty payloads", `{"type":"deliver","payloads":[],` + env + `}`, ErrInvalid, "deliver"},
		{"bad mode", `{"type":"deliver","mode":"now","payloads":[{"message":"x"}],` + env + `}`, ErrInvalid, "deliver"},
		{"bad message", `{"message":{"text":"x"},` + env + `}`, ErrInvalid, "deliver"},
	}
}()

func TestV0Rejects(t *testing.T) {
	tests := v0RejectCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			var we *Error
			if !errors.Is(err, tt.want) || !errors.As(err, &we) {
				t.Fatalf("err = %v, want %v as *Error", err, tt.want)
			}
			if we.Version != 0 || we.Kind != tt.kind {
				t.Fatalf("error fields: version %d kind %q, want 0 %q (%v)", we.Version, we.Kind, tt.kind, err)
			}
		})
	}
}

// Migrations are pure: the input document is not modified.
func TestV0MigrationIsPure(t *testing.T) {
	doc, err := parseObject(readFile(t, "testdata/v0/deliver-steer.json"))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := marshal(doc)
	if _, err := migrateV0(doc); err != nil {
		t.Fatal(err)
	}
	if after, _ := marshal(doc); !bytes.Equal(before, after) {
		t.Fatal("migrateV0 mutated its input")
	}
}
