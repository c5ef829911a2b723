package subjects

import (
	"fmt"
	"strings"
)

// MaxTokenLen bounds an encoded token. It keeps every subject and KV key far
// below the server's 4 KiB control-line limit. A plain ASCII address may be
// up to MaxTokenLen bytes; an address of escaped bytes up to a third of it.
const MaxTokenLen = 512

const hexDigits = "0123456789ABCDEF"

// plain reports whether b stands for itself in a token.
func plain(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// EncodeToken turns a raw address into one subject token and KV key segment.
func EncodeToken(raw string) (string, error) {
	if raw == "" {
		return "", ErrEmptyToken
	}
	n := encodedLen(raw)
	if n > MaxTokenLen {
		return "", fmt.Errorf("%w: %d bytes encode to %d characters (max %d)", ErrTokenTooLong, len(raw), n, MaxTokenLen)
	}
	if n == len(raw) {
		return raw, nil
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := 0; i < len(raw); i++ {
		b := raw[i]
		if plain(b) {
			sb.WriteByte(b)
			continue
		}
		sb.WriteByte('=')
		sb.WriteByte(hexDigits[b>>4])
		sb.WriteByte(hexDigits[b&0x0f])
	}
	return sb.String(), nil
}

func encodedLen(raw string) int {
	n := 0
	for i := 0; i < len(raw); i++ {
		if plain(raw[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// DecodeToken reverses EncodeToken. It accepts only the canonical encoding
// (upper-case hex, escapes only for bytes that need them), so decoding is the
// exact inverse of encoding.
func DecodeToken(tok string) (string, error) {
	if tok == "" {
		return "", ErrEmptyToken
	}
	if len(tok) > MaxTokenLen {
		return "", fmt.Errorf("%w: %d characters (max %d)", ErrTokenTooLong, len(tok), MaxTokenLen)
	}
	var sb strings.Builder
	for i := 0; i < len(tok); i++ {
		b := tok[i]
		if plain(b) {
			sb.WriteByte(b)
			continue
		}
		v, err := unescape(tok, i)
		if err != nil {
			return "", err
		}
		sb.WriteByte(v)
		i += 2
	}
	return sb.String(), nil
}

func unescape(tok string, i int) (byte, error) {
	if tok[i] != '=' || i+2 >= len(tok) {
		return 0, fmt.Errorf("%w: %q at offset %d", ErrBadToken, tok, i)
	}
	hi, lo := strings.IndexByte(hexDigits, tok[i+1]), strings.IndexByte(hexDigits, tok[i+2])
	if hi < 0 || lo < 0 {
		return 0, fmt.Errorf("%w: bad escape in %q at offset %d", ErrBadToken, tok, i)
	}
	v := byte(hi<<4 | lo)
	if plain(v) {
		return 0, fmt.Errorf("%w: needless escape in %q at offset %d", ErrBadToken, tok, i)
	}
	return v, nil
}

// ValidToken reports whether tok is a canonical encoded token.
func ValidToken(tok string) bool {
	_, err := DecodeToken(tok)
	return err == nil
}
