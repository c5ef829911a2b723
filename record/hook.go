package record

import (
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Hook is the value of baton_hooks/tok.<token>: which session an address
// (the stable token or an alias) belongs to. A tombstone stays after the
// session ended, so the address is never claimed again (the ingress answers
// 410 for it).
type Hook struct {
	Token     string    `json:"token"`       // encoded token (subjects.EncodeToken)
	Address   string    `json:"address"`     // raw address; filled from Token when empty
	SessionID string    `json:"sessionId"`   // owning session
	WireV     int       `json:"wireVersion"` // inbox wire version the owner accepts
	Tombstone bool      `json:"tombstone"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// Normalize validates h and fills Address from Token.
func (h *Hook) Normalize() error {
	if !subjects.ValidToken(h.Token) {
		return invalid("hook token %q is not a canonical encoded token", h.Token)
	}
	if err := subjects.ValidateSessionID(h.SessionID); err != nil {
		return invalid("hook %s: %w", h.Token, err)
	}
	raw, _ := subjects.DecodeToken(h.Token)
	if h.Address == "" {
		h.Address = raw
	}
	if h.Address != raw {
		return invalid("hook %s: address %q does not encode to the token", h.Token, h.Address)
	}
	return nil
}
