package runtime

import "time"

// Terminate is the family's part of an operator's end of a quarantined
// session, which no agent runs: the machine restored from snap ends with
// reason terminated exactly as it ends any session, and Terminate returns
// the commands that end sends — `end` to each open handle's child (it ends
// with reason closed) and, when a delegated turn was live, its cancelled
// child.result to the parent. They carry the IDs the machine always uses,
// so a repeated end, or one the session's own machine sent first, is
// deduplicated by the receivers. A snapshot built from the parent → child
// index alone (a checkpoint no build can decode) names the open handles
// and no parent: only the children are told.
//
// The ended snapshot itself is not returned: no checkpoint state version
// can express the reason terminated, so the owner that finishes the end
// writes it into the session record instead (record.Terminate).
func Terminate(cfg Config, snap Snapshot, now time.Time) ([]Send, error) {
	m, err := NewMachine(cfg, snap)
	if err != nil {
		return nil, err
	}
	if snap.Ended != "" {
		return nil, nil
	}
	m.now = now
	m.finalize(EndTerminated)
	return m.st.sends, nil
}
