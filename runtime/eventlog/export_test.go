package eventlog

import "time"

// SetRetryWait sets the first wait between two tries of a's appends.
func (a *Appender) SetRetryWait(d time.Duration) { a.retryWait = d }
