package ingress

import (
	"context"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// An operator's end of a quarantined session reaches its family the way
// the session's own end would (docs/runtime.md, R13): each open handle's
// child gets `end` (it ends with reason closed), and a child whose
// delegated turn was live reports it cancelled to its parent, so neither
// side waits for a session that will never run again. The commands carry
// the IDs the machine would have used, so a repeated end (or an owner
// that ended the session first) is deduplicated.

// endFamily sends those commands for the ended session rec (best effort,
// logged) and returns the children it ended. A checkpoint this build
// cannot decode names no family: its children are found by their alias
// hooks (kv.Store.Children), and its parent is not told.
func (s *Server) endFamily(ctx context.Context, a *attached, rec record.SessionRecord) []string {
	cp, readable, _ := readCheckpoint(rec)
	if !readable {
		cp.Handles = s.childHandles(ctx, a, rec.SessionID)
	}
	depth := 1
	if cp.Parent != nil {
		depth = cp.Parent.Depth + 1
	}
	var ended []string
	for _, h := range cp.Handles {
		if h.State == wire.HandleClosed || h.ChildSessionID == "" || depth > wire.MaxDepth {
			continue
		}
		c := s.runtimeCommand(wire.KindEnd, wire.CloseCommandID(rec.SessionID, h.Handle, h.Generation))
		c.ParentSessionID, c.Handle, c.Depth = rec.SessionID, h.Handle, depth
		if s.sendFamily(ctx, a, h.ChildSessionID, c) {
			ended = append(ended, h.ChildSessionID)
		}
	}
	if p := cp.Parent; p != nil && cp.Turn.Live && cp.Turn.Delegated {
		c := s.runtimeCommand(wire.KindChildResult, wire.ResultCommandID(rec.SessionID, cp.Turn.ID))
		c.ChildResult = &wire.ChildResult{Handle: p.Handle, ChildSessionID: rec.SessionID, CommandID: cp.Turn.CommandID,
			TurnID: cp.Turn.ID, Outcome: wire.ChildCancelled, Outputs: cp.Turn.Outputs, Ended: wire.EndTerminated}
		s.sendFamily(ctx, a, p.SessionID, c)
	}
	return ended
}

// childHandles are the open handles of a session whose checkpoint does
// not decode, as its children's alias hooks name them (an ended child's
// hook is a tombstone: left out).
func (s *Server) childHandles(ctx context.Context, a *attached, id string) []wire.HandleState {
	kids, err := a.store.Children(ctx, id)
	if err != nil {
		s.log.Warn("admin: end: the children of a session whose checkpoint does not decode", "session", id, "err", err)
	}
	var hs []wire.HandleState
	for _, c := range kids {
		if !c.Ended {
			hs = append(hs, wire.HandleState{Handle: c.Handle, Generation: c.Generation, ChildSessionID: c.SessionID})
		}
	}
	return hs
}

func (s *Server) runtimeCommand(k wire.Kind, id string) wire.Command {
	return wire.Command{V: wire.CurrentVersion, Kind: k, ID: id, AcceptedDeploymentID: s.cfg.Deployment, AcceptedAt: time.Now().UTC()}
}

// sendFamily publishes c to session id's stable inbox, encoded for its
// record's version, and wakes it; an ended or missing session is skipped.
func (s *Server) sendFamily(ctx context.Context, a *attached, id string, c wire.Command) bool {
	cur, err := a.sessionRecord(ctx, id)
	if err != nil || cur.Record.State == record.StateEnded {
		return false
	}
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		s.log.Warn("admin: end: command for the session's family", "to", id, "kind", c.Kind, "err", err)
		return false
	}
	t := target{sessionID: id, token: subjects.StableToken(id), wireV: versionOr(cur.Record.WireV), deployment: cur.Record.DeploymentID}
	if _, err := s.publish(ctx, a, t, c, data); err != nil {
		s.log.Warn("admin: end: command for the session's family not sent", "to", id, "kind", c.Kind, "err", err)
		return false
	}
	return true
}
