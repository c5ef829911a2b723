package subjects

import "errors"

var (
	// ErrEmptyToken is returned when an address or token is empty.
	ErrEmptyToken = errors.New("subjects: empty address")
	// ErrTokenTooLong is returned when an encoded token would exceed MaxTokenLen.
	ErrTokenTooLong = errors.New("subjects: address too long")
	// ErrBadToken is returned when a string is not a valid encoded token.
	ErrBadToken = errors.New("subjects: malformed token")
	// ErrBadDeployment is returned for an invalid deployment ID.
	ErrBadDeployment = errors.New("subjects: invalid deployment ID")
	// ErrBadAgent is returned for an invalid agent name.
	ErrBadAgent = errors.New("subjects: invalid agent name")
	// ErrBadPrefix is returned for an invalid name prefix.
	ErrBadPrefix = errors.New("subjects: invalid prefix")
	// ErrBadSessionID is returned for an invalid session ID.
	ErrBadSessionID = errors.New("subjects: invalid session ID")
	// ErrNoMatch is returned when a subject or key does not have the expected shape.
	ErrNoMatch = errors.New("subjects: name does not match")
)
