package pool

import (
	"fmt"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// points are the owner process's failpoints (internal/failpoint):
// Config.Failpoints, armed by tests and by bin/owner --fault only; nil in
// production, where each point costs a nil check. The session's points
// are the same registry (session.Env.Failpoints), and so are the
// handoff's.
type points struct{ r *failpoint.Registry }

func (p points) dropWake(req protocol.WakeRequest) bool {
	return p.r.Hit(failpoint.DropWake, failpoint.Args{SessionID: req.SessionID, Detail: string(req.Source)})
}

func (p points) holdLeaseRenewal() bool {
	return p.r.Hit(failpoint.HoldLeaseRenewal, failpoint.Args{})
}

func (p points) failLeaseRenewal() bool {
	return p.r.Hit(failpoint.FailLeaseRenewal, failpoint.Args{})
}

func (p points) loseLeaseReply() bool { return p.r.Hit(failpoint.LoseLeaseReply, failpoint.Args{}) }

func (p points) refuseActivation(id string) bool {
	return p.r.Hit(failpoint.RefuseActivation, failpoint.Args{SessionID: id})
}

func (p points) afterIndex(id string) { p.r.Run(failpoint.AfterIndex, failpoint.Args{SessionID: id}) }

func (p points) afterClaim(id string) { p.r.Run(failpoint.AfterClaim, failpoint.Args{SessionID: id}) }

// readStateVersion is the highest state version this process reads: the
// build's, or lower as the failpoint ReadStateVersion says.
func (p points) readStateVersion() int {
	if v := p.r.Value(failpoint.ReadStateVersion); v > 0 {
		return min(v, wire.CurrentStateVersion)
	}
	return wire.CurrentStateVersion
}

// readable refuses a checkpoint above readStateVersion as an older build's
// wire.DecodeCheckpoint would.
func (p points) readable(cp []byte) error {
	top := p.readStateVersion()
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
