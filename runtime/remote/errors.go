package remote

import "errors"

// ErrConfig is the error of an invalid Config.
var ErrConfig = errors.New("remote: invalid configuration")

// errNoResponders is a step request nobody subscribes to.
var errNoResponders = errors.New("no responders")

// errSilent is a worker that took the step and went silent.
var errSilent = errors.New("worker silent")
