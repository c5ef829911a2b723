package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
)

// Pending child sends (docs/driver.md "Child sends"): a child-creating
// send whose deployment has no live owner is retried here, outside the
// session loop, until the child is created and the delegation stored, or
// until its deadline (its durable start plus ChildSendTimeout) has passed
// or its deployment is retired — then the delegation fails: a failed
// child.result with child_unavailable goes to the parent's own inbox.

// DefaultChildSendTimeout bounds a pending child send by default.
const DefaultChildSendTimeout = session.DefaultChildSendTimeout

// errUnavailable: the child cannot be created (deadline, retirement).
var errUnavailable = errors.New("child unavailable")

func (o *sender) SendPending(ctx context.Context, from string, p runtime.PendingSend, deadline time.Time) error {
	return o.sendPending(ctx, from, p, deadline)
}

func (o *sender) Retired(ctx context.Context, deployment string) (bool, error) {
	return o.cfg.Store.DeploymentRetired(ctx, deployment)
}

func (o *sender) sendPending(ctx context.Context, from string, p runtime.PendingSend, deadline time.Time) error {
	err := o.retryPending(ctx, from, p, deadline)
	if !errors.Is(err, errUnavailable) {
		return err
	}
	s := p.Send
	o.log.Warn("a child send failed: the child is unavailable", "from", from, "to", s.SessionID, "deployment", s.DeploymentID, "err", err)
	o.metrics.sent(s.Command.Kind, "unavailable")
	text := runtimeErrorText(err)
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(5*time.Second)), ctx)
	if err := backoff.Retry(func() error {
		err := o.failDelegation(ctx, from, s, "unavailable", "unavailable", text)
		if errors.Is(err, errEncode) {
			return backoff.Permanent(err)
		}
		return err
	}, b); err != nil {
		return err
	}
	return session.ErrSendExpired
}

// retryPending tries the send with backoff until it is stored (nil), ctx
// ends, or it is unavailable (errUnavailable).
func (o *sender) retryPending(ctx context.Context, from string, p runtime.PendingSend, deadline time.Time) error {
	s := p.Send
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), dctx)
	attempt := 0
	var last error
	err := backoff.Retry(func() error {
		if !o.lease.valid() {
			return backoff.Permanent(ErrFenced)
		}
		last = o.trySend(ctx, from, s) // each attempt is bounded; one runs even past the deadline

		if last == nil || dctx.Err() != nil {
			return last
		}
		if retired, rerr := o.cfg.Store.DeploymentRetired(ctx, s.DeploymentID); rerr == nil && retired {
			return backoff.Permanent(fmt.Errorf("%w: deployment %s is retired", errUnavailable, s.DeploymentID))
		}
		if attempt++; attempt%10 == 1 {
			o.log.Info("pending child send not stored yet; retrying", "from", from, "to", s.SessionID, "attempt", attempt,
				"deadline", deadline, "err", last)
		}
		return last
	}, b)
	switch {
	case err == nil || errors.Is(err, errUnavailable) || errors.Is(err, ErrFenced) || ctx.Err() != nil:
		return err
	case dctx.Err() != nil:
		return fmt.Errorf("%w: no owner of deployment %s created child %s within %v of the delegation (last: %v)",
			errUnavailable, s.DeploymentID, s.SessionID, deadline.Sub(p.Since), last)
	}
	return err
}

// runtimeErrorText is the child.result error text of an unavailable
// child: "child_unavailable: <why>".
func runtimeErrorText(err error) string {
	msg, _ := strings.CutPrefix(err.Error(), errUnavailable.Error()+": ")
	return wire.ChildErrorText(wire.CodeChildUnavailable, msg)
}

// existingChild is the target of a child-creating send whose deployment
// has no owner running, when the child exists already (created by an
// earlier attempt): its record names its inbox version and deployment.
// An ended child is errGone; no child at all is cause.
func (o *sender) existingChild(ctx context.Context, s runtime.Send, cause error) (int, string, error) {
	cur, err := o.cfg.Store.LeaderSession(ctx, s.SessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return 0, "", cause
	case err != nil:
		return 0, "", fmt.Errorf("%w (reading the child: %w)", cause, err)
	case cur.Record.State == record.StateEnded:
		return 0, "", errGone
	}
	return versionOr(cur.Record.WireV), cur.Record.DeploymentID, nil
}
