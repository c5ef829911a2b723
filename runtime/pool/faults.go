package pool

import (
	"fmt"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// The owner process's failpoints (internal/failpoint): Config.Failpoints,
// armed by tests and by bin/owner --fault only; nil in production, where
// each point costs a nil check. The session's points are the same
// registry (session.Env.Failpoints), and so are the handoff's.

func (o *Owner) dropWake(req protocol.WakeRequest) bool {
	return o.fp.Hit(failpoint.DropWake, failpoint.Args{SessionID: req.SessionID, Detail: string(req.Source)})
}

func (o *Owner) holdLeaseRenewal() bool {
	return o.fp.Hit(failpoint.HoldLeaseRenewal, failpoint.Args{})
}

func (o *Owner) failLeaseRenewal() bool {
	return o.fp.Hit(failpoint.FailLeaseRenewal, failpoint.Args{})
}

func (o *Owner) loseLeaseReply() bool { return o.fp.Hit(failpoint.LoseLeaseReply, failpoint.Args{}) }

func (o *Owner) refuseActivation(id string) bool {
	return o.fp.Hit(failpoint.RefuseActivation, failpoint.Args{SessionID: id})
}

func (o *Owner) afterIndex(id string) { o.fp.Run(failpoint.AfterIndex, failpoint.Args{SessionID: id}) }

func (o *Owner) afterClaim(id string) { o.fp.Run(failpoint.AfterClaim, failpoint.Args{SessionID: id}) }

// readStateVersion is the highest state version this process reads: the
// build's, or lower as the failpoint ReadStateVersion says.
func (o *Owner) readStateVersion() int {
	if v := o.fp.Value(failpoint.ReadStateVersion); v > 0 {
		return min(v, wire.CurrentStateVersion)
	}
	return wire.CurrentStateVersion
}

// readable refuses a checkpoint above readStateVersion as an older build's
// wire.DecodeCheckpoint would.
func (o *Owner) readable(cp []byte) error {
	top := o.readStateVersion()
	if top == wire.CurrentStateVersion {
		return nil
	}
	v, err := wire.ReadStateVersion(cp)
	if err == nil && v > top {
		err = &wire.StateError{StateV: v, Err: wire.ErrUnsupportedState,
			Reason: fmt.Sprintf("fault: this build reads state versions %d to %d", wire.MinStateVersion, top)}
	}
	return err
}
