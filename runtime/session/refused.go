package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// refusal names why a commit was refused for a reason of the session's
// own — its checkpoint or record too large (wire.ErrTooLarge when
// encoding, record.ErrTooLarge from the store) or invalid — or "" when err
// is no refusal (nil, a lost CAS, a store that did not answer).
func refusal(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, wire.ErrTooLarge), errors.Is(err, record.ErrTooLarge):
		return record.CommitTooLarge
	case errors.Is(err, wire.ErrInvalid), errors.Is(err, record.ErrInvalid):
		return record.CommitInvalid
	}
	return ""
}

// refused stops this run because its own commit was refused (docs/driver.md,
// "Quarantine"). The run still owns the record at the revision it holds, so
// it records the refusal there (record.Refused: the attempt counted with
// the refusal as its error, the session let go); the next claim counts no
// death for it, and a quarantine that follows names the refusal, not
// process_died. Nothing of the refused commit is kept: the next run
// resumes from the last commit.
func (s *Session) refused(ctx context.Context, code string, cause error) error {
	msg := code + ": " + cause.Error()
	s.log.Error("commit refused; stopping", "code", code, "err", cause)
	rec, err := record.Refused(s.rec, s.rec.Ownership(), msg, "refused-"+s.runID, s.now().UTC())
	if err == nil {
		_, err = s.env.Records.UpdateSession(ctx, rec, s.rev)
	}
	if err != nil {
		s.log.Warn("refused commit not recorded (the next claim counts it as a death)", "err", err)
	}
	return fmt.Errorf("%w: %s", ErrCommitRefused, msg)
}
