package session

import (
	"context"

	"github.com/baton-rt/baton/wire"
)

// refuseOtherAgents marks a handoff trigger stamped with another agent's
// deployment Refused (agent_mismatch): the machine records
// command.rejected for it instead of applying it, and never hands off. A
// command a parent sent (Parent set) and every other kind cross agents
// freely: they are not triggers.
func (s *Session) refuseOtherAgents(ctx context.Context, in *wire.TurnInput) error {
	if s.env.Agents == nil || in.Rejected != "" {
		return nil
	}
	target := ""
	switch {
	case in.Kind == wire.KindDeliver && in.Parent == nil:
		target = in.Deployment
	case in.Kind == wire.KindMove:
		target = in.Target
	}
	if target == "" || target == s.env.Deployment {
		return nil
	}
	same, err := s.env.Agents.SameAgent(ctx, target)
	if err != nil {
		return err
	}
	if !same {
		in.Refused = wire.RejectAgentMismatch
		s.log.Warn("refused a handoff trigger from another agent's deployment",
			"seq", in.Seq, "command", in.ID, "kind", in.Kind, "deployment", target)
	}
	return nil
}
