package natsproc

import "errors"

// ErrNotRunning is returned for an operation on a node that is not running.
var ErrNotRunning = errors.New("natsproc: node not running")

// ErrNoLeader is returned when a stream has no leader (or names a server
// that is not a node of the cluster).
var ErrNoLeader = errors.New("natsproc: stream has no leader")
