package wire

import (
	"errors"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The key pattern the schemas state and the Go rule agree.
func TestTagKeyPattern(t *testing.T) {
	if !strings.Contains(tagKeyPattern, "{1,"+strconv.Itoa(MaxTagKeyBytes)+"}") {
		t.Fatalf("tag key pattern %s does not bound keys to %d bytes", tagKeyPattern, MaxTagKeyBytes)
	}
	re := regexp.MustCompile(tagKeyPattern)
	keys := []string{"", "a", "az09_.-", strings.Repeat("k", MaxTagKeyBytes), strings.Repeat("k", MaxTagKeyBytes+1),
		"A", "a b", "a\n", "a\x00", "é", "a/b", "a:b", "a+b", "\u212a"}
	for c := range 256 {
		keys = append(keys, "k"+string(rune(c)))
	}
	for _, k := range keys {
		if validTagKey(k) != re.MatchString(k) {
			t.Errorf("key %q: Go rule %v, pattern %v", k, validTagKey(k), re.MatchString(k))
		}
	}
}

func TestValidateTags(t *testing.T) {
	for name, tags := range map[string]map[string]string{
		"nil":            nil,
		"empty":          {},
		"one":            {"env": "prod"},
		"empty value":    {"note": ""},
		"every key char": {"az09_.-": "x"},
		"longest key":    {strings.Repeat("k", MaxTagKeyBytes): "x"},
		"longest value":  {"a": strings.Repeat("v", MaxTagValueBytes), "b": strings.Repeat("é", MaxTagValueBytes/2)},
		"MaxTags":        manyTags(MaxTags, "v"),
	} {
		if err := ValidateTags(tags); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, tt := range []struct {
		name string
		tags map[string]string
		key  string // the key the error names ("" for none)
	}{
		{"too many", manyTags(MaxTags+1, "v"), ""},
		{"upper case", map[string]string{"ok": "x", "Env": "x"}, "Env"},
		{"empty key", map[string]string{"": "x"}, `""`},
		{"space", map[string]string{"a b": "x"}, "a b"},
		{"colon", map[string]string{"a:b": "x"}, "a:b"},
		{"non-ASCII key", map[string]string{"é": "x"}, "é"},
		{"long key", map[string]string{strings.Repeat("k", MaxTagKeyBytes+1): "x"}, strings.Repeat("k", MaxTagKeyBytes+1)},
		{"trailing newline", map[string]string{"env\n": "x"}, `env\n`},
		{"long value", map[string]string{"env": strings.Repeat("v", MaxTagValueBytes+1)}, "env"},
		{"long value in characters", map[string]string{"env": strings.Repeat("é", MaxTagValueBytes/2+1)}, "env"},
		{"invalid UTF-8", map[string]string{"env": "a\xffb"}, "env"},
	} {
		err := ValidateTags(tt.tags)
		if !errors.Is(err, ErrInvalid) || tt.key != "" && !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: err = %v, want ErrInvalid naming %s", tt.name, err, tt.key)
		}
	}
	if err := ValidateTags(manyTags(MaxTags+1, "v")); err == nil || !strings.Contains(err.Error(), "17 tags, limit 16") {
		t.Errorf("too many: %v", err)
	}
}

func TestMergeTags(t *testing.T) {
	cur := map[string]string{"env": "dev", "team": "search", "draft": ""}
	before := maps.Clone(cur)
	for _, tt := range []struct {
		name string
		tag  Tag
		want map[string]string
	}{
		{"set and remove", Tag{Set: map[string]string{"env": "prod", "owner": "Zoë"}, Remove: []string{"draft", "absent"}},
			map[string]string{"env": "prod", "team": "search", "owner": "Zoë"}},
		{"nothing", Tag{}, cur},
		{"remove all", Tag{Remove: []string{"env", "team", "draft"}}, nil},
		{"up to MaxTags", Tag{Set: manyTags(MaxTags-3, "v")}, func() map[string]string {
			m := manyTags(MaxTags-3, "v")
			maps.Copy(m, cur)
			return m
		}()},
	} {
		got, err := MergeTags(cur, tt.tag)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.name, got, err, tt.want)
		}
		if !reflect.DeepEqual(cur, before) {
			t.Fatalf("%s: MergeTags mutated cur: %v", tt.name, cur)
		}
		if len(got) > 0 {
			got["x"] = "y" // the result is a new map
			if _, ok := cur["x"]; ok {
				t.Fatalf("%s: the result shares cur", tt.name)
			}
		}
	}
	got, err := MergeTags(cur, Tag{Set: manyTags(MaxTags-2, "v")})
	if !errors.Is(err, ErrTooLarge) || got != nil || !strings.Contains(err.Error(), "17 tags, limit 16") {
		t.Errorf("over MaxTags: %v %v", got, err)
	}
	if got, err := MergeTags(nil, Tag{Remove: []string{"a"}}); got != nil || err != nil {
		t.Errorf("remove from none: %v %v", got, err)
	}
	if got, err := MergeTags(nil, Tag{Set: map[string]string{"a": ""}}); err != nil || !reflect.DeepEqual(got, map[string]string{"a": ""}) {
		t.Errorf("set on none: %v %v", got, err)
	}
}

func TestSameTags(t *testing.T) {
	for _, tt := range []struct {
		a, b map[string]string
		want bool
	}{
		{nil, nil, true},
		{nil, map[string]string{}, true},
		{map[string]string{"a": "1"}, map[string]string{"a": "1"}, true},
		{map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{map[string]string{"a": ""}, nil, false},
		{map[string]string{"a": ""}, map[string]string{"b": ""}, false},
		{map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, false},
	} {
		if got := SameTags(tt.a, tt.b); got != tt.want || SameTags(tt.b, tt.a) != tt.want {
			t.Errorf("SameTags(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
