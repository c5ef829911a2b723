package driver

import "errors"

var (
	// ErrEventGap means an event would leave a hole in a session's seq.
	ErrEventGap = errors.New("driver: event seq gap")
)
