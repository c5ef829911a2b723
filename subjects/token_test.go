package subjects

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeTokenTable(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
		err             error
	}{
		{"plain", "session-01_ab", "session-01_ab", nil},
		{"slack thread", "C123.456", "C123=2E456", nil},
		{"email message id", "<CAF=x@mail.example.com>", "=3CCAF=3Dx=40mail=2Eexample=2Ecom=3E", nil},
		{"unicode", "ü", "=C3=BC", nil},
		{"wildcards", "a.*.>", "a=2E=2A=2E=3E", nil},
		{"whitespace", "a b\tc", "a=20b=09c", nil},
		{"escape char", "=", "=3D", nil},
		{"empty", "", "", ErrEmptyToken},
		{"over-long", strings.Repeat("x", MaxTokenLen+1), "", ErrTokenTooLong},
		{"over-long escaped", strings.Repeat(".", MaxTokenLen/3+1), "", ErrTokenTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeToken(tc.raw)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if got != tc.want {
				t.Fatalf("EncodeToken(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			back, err := DecodeToken(got)
			if err != nil || back != tc.raw {
				t.Fatalf("DecodeToken(%q) = %q, %v", got, back, err)
			}
		})
	}
}

func TestMaxLengthAccepted(t *testing.T) {
	if _, err := EncodeToken(strings.Repeat("x", MaxTokenLen)); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsNonCanonical(t *testing.T) {
	for _, tok := range []string{"a=", "a=4", "=zz", "=2e", "=41", "a.b", "a*", "a>", "a b", "", "=4G"} {
		if _, err := DecodeToken(tok); err == nil {
			t.Errorf("DecodeToken(%q) accepted a non-canonical token", tok)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"C123.456", "<id@example.com>", "ü", "", "=", "a.b.c", "x y", strings.Repeat("é", 100)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, errA := EncodeToken(a)
		tb, errB := EncodeToken(b)
		if errA == nil {
			checkToken(t, a, ta)
		}
		if errA == nil && errB == nil && a != b && ta == tb {
			t.Fatalf("collision: %q and %q both encode to %q", a, b, ta)
		}
		_ = tb
	})
}

func checkToken(t *testing.T, raw, tok string) {
	t.Helper()
	if tok == "" || len(tok) > MaxTokenLen || !utf8.ValidString(tok) {
		t.Fatalf("bad token %q for %q", tok, raw)
	}
	if strings.ContainsAny(tok, ".*> \t\r\n\f\v") {
		t.Fatalf("token %q of %q has a forbidden character", tok, raw)
	}
	for _, r := range tok {
		if r > 0x7e || r < 0x21 {
			t.Fatalf("token %q has non-printable %q", tok, r)
		}
	}
	back, err := DecodeToken(tok)
	if err != nil || back != raw {
		t.Fatalf("round trip %q -> %q -> %q, %v", raw, tok, back, err)
	}
}
