package ingress

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/baton-rt/baton/wire"
)

const testDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// The rewrite keeps every member but the data's ref in place and as
// stored; envelopes without a valid ref are not rewritten.
func TestOutputRewrite(t *testing.T) {
	t.Parallel()
	ref := `{"digest":"` + testDigest + `","size":3}`
	for _, tc := range []struct {
		name, in, want string // want "": not rewritten
	}{
		{"ref", `{"seq":2,"kind":"message.output","data":{"turnId":"t1","ref":` + ref + `},"v":1}`,
			`{"seq":2,"kind":"message.output","data":{"turnId":"t1","text":"a\"<"},"v":1}`},
		{"ref first, extra member", `{"data":{"ref":` + ref + `,"turnId":"t1","x":[1, 2]},"seq":2}`,
			`{"data":{"text":"a\"<","turnId":"t1","x":[1, 2]},"seq":2}`},
		{"text and ref", `{"data":{"text":"old","ref":` + ref + `}}`, `{"data":{"text":"a\"<"}}`},
		{"inline", `{"data":{"turnId":"t1","text":"the \"ref\": here"}}`, ""},
		{"no data", `{"ref":` + ref + `}`, ""},
		{"bad ref", `{"data":{"ref":{"digest":"md5:x","size":3}}}`, ""},
		{"ref not an object", `{"data":{"ref":"x"}}`, ""},
		{"data not an object", `{"data":["ref"]}`, ""},
		{"truncated", `{"data":{"ref":` + ref, ""},
		{"two refs", `{"data":{"ref":` + ref + `,"ref":` + ref + `}}`, ""},
		{"two data", `{"data":{"ref":` + ref + `},"data":{}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := parseOutput([]byte(tc.in))
			if ok != (tc.want != "") {
				t.Fatalf("parseOutput ok = %v", ok)
			}
			if ok {
				if got := out.with([]byte(`a"<`)); string(got) != tc.want {
					t.Fatalf("got  %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

// Whatever the envelope, parsing never panics, and a rewrite is one line
// of JSON whose data holds the text and no ref.
func FuzzOutputRewrite(f *testing.F) {
	ref, _ := json.Marshal(wire.BlobRef{Digest: testDigest, Size: 1})
	f.Add([]byte(`{"seq":1,"data":{"turnId":"t1","ref":`+string(ref)+`}}`), "line one\nline two\u2028")
	f.Add([]byte(`{"data":{"ref":`+string(ref)+`,"ref":1}}`), "x")
	f.Add([]byte(`{"data":{"ref":`+string(ref)+`},"data":{}}`), "x")
	f.Add([]byte(`{"data":{"text":"x"}}`), "")
	f.Fuzz(func(t *testing.T, envelope []byte, text string) {
		out, ok := parseOutput(envelope)
		if !ok || !utf8.ValidString(text) { // content that is not UTF-8 is never inlined
			return
		}
		got := out.with([]byte(text))
		if bytes.ContainsAny(got, "\n\r") {
			t.Fatalf("rewrite spans lines: %q", got)
		}
		var env, data map[string]json.RawMessage
		if err := json.Unmarshal(got, &env); err != nil {
			t.Fatalf("rewrite %q is not JSON: %v", got, err)
		}
		if err := json.Unmarshal(env["data"], &data); err != nil {
			t.Fatalf("rewrite %q has no data object: %v", got, err)
		}
		var s string
		if err := json.Unmarshal(data["text"], &s); err != nil || s != text {
			t.Fatalf("data.text = %s, want %q", data["text"], text)
		}
		if _, has := data["ref"]; has {
			t.Fatalf("rewrite kept a ref: %s", got)
		}
	})
}
