package topology

import (
	"errors"
	"fmt"
)

// ErrIncompatible is matched by every *IncompatibleError.
var ErrIncompatible = errors.New("topology: incompatible existing resource")

// IncompatibleError reports a pre-existing resource that JetStream cannot
// change into the one Baton needs.
type IncompatibleError struct {
	Resource string // stream or bucket name
	Field    string // the config field that differs
	Have     string
	Want     string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("topology: %s has %s=%s but Baton needs %s=%s; JetStream cannot change %s in place: "+
		"back up and remove it (nats stream rm %s) or use another --prefix",
		e.Resource, e.Field, e.Have, e.Field, e.Want, e.Field, e.Resource)
}

// Unwrap makes errors.Is(err, ErrIncompatible) true.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }
