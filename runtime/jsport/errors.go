package jsport

import "errors"

// ErrNotOpen: a port whose JetStream resource the owner opens when it runs
// (the state object store, the journal bucket) was used before that.
var ErrNotOpen = errors.New("jsport: the object store or bucket is not open yet")

// ErrNotTheSessions: Inbox.Read found the message at the sequence on
// another session's subject.
var ErrNotTheSessions = errors.New("jsport: the inbox message is not the session's")
