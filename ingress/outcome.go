package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Command outcome lookup (docs/api.md, "Command outcome"): GET
// /v1/sessions/{id}/commands/{seq} and the "command" operation over NATS.
// A command's outcome is the one terminal event its session's owner
// records for it — command.applied, command.rejected, command.superseded
// or wire.rejected, each with the command's inbox sequence in data.seq —
// or "pending" while the session's record says the command is not
// processed yet. The ingress reads, never writes.

// Statuses of a command (CommandOutcome.Status).
const (
	CommandPending    = "pending"    // accepted; the session has not processed it yet
	CommandApplied    = "applied"    // command.applied
	CommandRejected   = "rejected"   // command.rejected: decoded and refused (reason)
	CommandSuperseded = "superseded" // command.superseded: a newer latest-mode delivery replaced it
	CommandInvalid    = "invalid"    // wire.rejected: the owner could not decode it (reason)
)

// Codes of the lookup (docs/api.md).
const (
	// CodeCommandNotFound (404, ErrNotFound): the sequence is not a command
	// of this session — beyond the inbox's last sequence, a message on
	// another subject, or no trace of it in the session.
	CodeCommandNotFound = "command_not_found"
	// CodeOutcomeNotFound (404, ErrNotFound): the session processed the
	// command (or may have), but its outcome event was not found within
	// MaxOutcomeScan events.
	CodeOutcomeNotFound = "outcome_not_found"
)

// Bounds of the outcome search: it reads the session's events newest
// first, in windows of outcomeFirstWindow events doubling up to
// outcomeMaxWindow, MaxOutcomeScan events at most (one direct get each,
// plus a binary search of the stream per window).
const (
	MaxOutcomeScan     = 10_000
	outcomeFirstWindow = 128
	outcomeMaxWindow   = 2048
)

// CommandOutcome answers a command outcome lookup: 200 {"sessionId",
// "seq","status","commandId","eventSeq","reason","supersededBy"}.
// CommandID is the command's id (the receipt's commandId): the outcome
// event's (for an undecodable payload without one the owner names it
// rejected-<seq>), else, pending, the inbox message's ("" if it has none).
// EventSeq is the outcome event's seq in the session's events (0, absent,
// when pending). Reason is command.rejected's or wire.rejected's reason;
// SupersededBy the inbox sequence of the delivery that superseded it.
type CommandOutcome struct {
	SessionID    string `json:"sessionId"`
	Seq          uint64 `json:"seq"`
	Status       string `json:"status"`
	CommandID    string `json:"commandId"`
	EventSeq     uint64 `json:"eventSeq,omitempty"`
	Reason       string `json:"reason,omitempty"`
	SupersededBy uint64 `json:"supersededBy,omitempty"`
}

// OutcomeStatus is the status a session event of kind settles a command
// with (command.applied → applied, command.rejected → rejected,
// command.superseded → superseded, wire.rejected → invalid); ok is false
// for every other kind.
func OutcomeStatus(kind string) (status string, ok bool) {
	switch kind {
	case wire.EventCommandApplied:
		return CommandApplied, true
	case wire.EventCommandRejected:
		return CommandRejected, true
	case wire.EventCommandSuperseded:
		return CommandSuperseded, true
	case wire.EventWireRejected:
		return CommandInvalid, true
	}
	return "", false
}

// CommandRequest is a lookup of the command at inbox sequence Seq of
// session SessionID (the NATS body {"sessionId","seq"}).
type CommandRequest struct {
	SessionID string `json:"sessionId"`
	Seq       uint64 `json:"seq"`
}

// ParseCommandRequest parses the NATS body {"sessionId","seq"}: both
// required, seq a positive integer.
func ParseCommandRequest(b []byte) (CommandRequest, error) {
	var v struct {
		SessionID *string          `json:"sessionId"`
		Seq       *json.RawMessage `json:"seq"`
	}
	if err := decodeStrict(b, &v, []string{"sessionId", "seq"}); err != nil {
		return CommandRequest{}, bad("%v", err)
	}
	if v.SessionID == nil {
		return CommandRequest{}, bad("sessionId is required")
	}
	if v.Seq == nil {
		return CommandRequest{}, bad("seq is required")
	}
	seq, err := parseCommandSeq(string(*v.Seq))
	if err != nil {
		return CommandRequest{}, err
	}
	return CommandRequest{SessionID: *v.SessionID, Seq: seq}, checkSessionID(*v.SessionID)
}

// parseCommandSeq reads a command's inbox sequence: a positive decimal
// integer.
func parseCommandSeq(v string) (uint64, error) {
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, bad("seq %q: want a positive integer (the receipt's seq)", clip(v))
	}
	return seq, nil
}

func (s *Server) httpCommand(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return err
	}
	seq, err := parseCommandSeq(r.PathValue("seq"))
	if err != nil {
		return err
	}
	out, err := s.CommandOutcome(r.Context(), CommandRequest{SessionID: id, Seq: seq})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// CommandOutcome looks up the outcome of the command at inbox sequence
// req.Seq of session req.SessionID:
//
//   - the session: unknown 404 not_found, deleted 410 deleted;
//   - the inbox message at seq (a leader read): on a subject that is not
//     one of the session's addresses, or seq beyond the inbox's last
//     sequence, 404 command_not_found;
//   - a message of the session that its record does not count as
//     processed (confirmed by a leader read of the record): pending;
//   - otherwise the outcome event with data.seq = seq, in the record's
//     outbox or among the session's last MaxOutcomeScan events (newest
//     first). Not found: 404 command_not_found when every event of the
//     session was read and nothing says the sequence was the session's,
//     else 404 outcome_not_found.
func (s *Server) CommandOutcome(ctx context.Context, req CommandRequest) (CommandOutcome, error) {
	id, seq := req.SessionID, req.Seq
	if err := checkSessionID(id); err != nil {
		return CommandOutcome{}, err
	}
	if seq == 0 {
		return CommandOutcome{}, bad("seq 0: want a positive integer (the receipt's seq)")
	}
	a, err := s.topology(ctx)
	if err != nil {
		return CommandOutcome{}, err
	}
	cur, err := a.liveRecord(ctx, id)
	if err != nil {
		return CommandOutcome{}, err
	}
	cp, _, err := readCheckpoint(cur.Record)
	if err != nil {
		return CommandOutcome{}, fail(ErrUnavailable, "session %s: checkpoint: %v", id, err)
	}
	out := CommandOutcome{SessionID: id, Seq: seq}
	present, cid, err := s.inboxMessage(ctx, a, id, seq, cp)
	if err != nil {
		return CommandOutcome{}, err
	}
	out.CommandID = cid
	if present && !cp.Applied.Has(seq) {
		// Not processed, as the record read says; a leader read confirms
		// it (a replica may serve an older record).
		if cp, err = s.leaderCheckpoint(ctx, a, id); err != nil {
			return CommandOutcome{}, err
		}
		if !cp.Applied.Has(seq) {
			out.Status = CommandPending
			return out, nil
		}
	}
	// The session's own: its message is on one of its subjects, or its
	// record lists the sequence as applied above its low mark (below it,
	// every sequence counts as processed, the session's or not).
	_, above := slices.BinarySearch(cp.Applied.Above, seq)
	ours := present || seq >= cp.Applied.Low && above

	hit, scanned, exhaustive, err := s.findOutcome(ctx, a, id, seq, cp.Outbox)
	switch {
	case err != nil:
		return CommandOutcome{}, fail(ErrUnavailable, "session %s: read events: %v", id, err)
	case hit.status != "":
		out.Status, out.EventSeq, out.Reason, out.SupersededBy = hit.status, hit.eventSeq, hit.Reason, hit.By
		if hit.CommandID != "" {
			out.CommandID = hit.CommandID
		}
		return out, nil
	case exhaustive && !ours:
		return CommandOutcome{}, commandNotFound(id, seq, fmt.Sprintf("its message is gone and none of the session's %d events names it", scanned))
	case exhaustive:
		return CommandOutcome{}, &Error{Err: ErrNotFound, Detail: CodeOutcomeNotFound, Message: fmt.Sprintf(
			"session %s processed the command at inbox seq %d, but none of its %d events is its outcome", id, seq, scanned)}
	}
	return CommandOutcome{}, &Error{Err: ErrNotFound, Detail: CodeOutcomeNotFound, Message: fmt.Sprintf(
		"no outcome of inbox seq %d among the last %d events of session %s (the lookup reads at most %d): an older command, or not one of this session",
		seq, scanned, id, MaxOutcomeScan)}
}

// inboxMessage reads the inbox message at seq from the stream leader (a
// lagging replica could hide a command accepted a moment ago): present
// with its command's id, or absent (deleted: owners purge processed
// commands). A sequence beyond the inbox's last, or a message on another
// subject than the session's inbox subjects, is 404 command_not_found.
func (s *Server) inboxMessage(ctx context.Context, a *attached, id string, seq uint64, cp wire.Checkpoint) (present bool, commandID string, err error) {
	m, err := kv.NewStream(s.cfg.JS, s.cfg.Names.InboxStream()).Get(ctx, seq)
	switch {
	case errors.Is(err, record.ErrNotFound):
		info, err := a.inbox.Info(ctx)
		if err != nil {
			return false, "", fail(ErrUnavailable, "inbox: %v", err)
		}
		if seq > info.State.LastSeq {
			return false, "", commandNotFound(id, seq, fmt.Sprintf("beyond the inbox's last sequence %d", info.State.LastSeq))
		}
		return false, "", nil
	case err != nil:
		return false, "", fail(ErrUnavailable, "inbox message %d: %v", seq, err)
	case !slices.Contains(s.inboxSubjects(cp), m.Subject):
		return false, "", commandNotFound(id, seq, "a message on another subject than the session's inbox subjects")
	}
	return true, commandIDOf(m.Data), nil
}

// leaderCheckpoint reads session id's checkpoint from the record the
// stream leader holds.
func (s *Server) leaderCheckpoint(ctx context.Context, a *attached, id string) (wire.Checkpoint, error) {
	lead, err := a.store.LeaderSession(ctx, id)
	if err != nil {
		return wire.Checkpoint{}, sessionReadErr(id, err)
	}
	if lead.Record.IsDeleted() {
		return wire.Checkpoint{}, deletedErr(id)
	}
	cp, _, err := readCheckpoint(lead.Record)
	if err != nil {
		return wire.Checkpoint{}, fail(ErrUnavailable, "session %s: checkpoint: %v", id, err)
	}
	return cp, nil
}

func commandNotFound(id string, seq uint64, why string) *Error {
	return &Error{Err: ErrNotFound, Detail: CodeCommandNotFound,
		Message: fmt.Sprintf("inbox seq %d is not a command of session %s: %s", seq, id, why)}
}

// sessionReadErr is a failed read of session id's record: 404 when there
// is none.
func sessionReadErr(id string, err error) error {
	if errors.Is(err, record.ErrNotFound) {
		return fail(ErrNotFound, "no session %s", id)
	}
	return fail(ErrUnavailable, "read session %s: %v", id, err)
}

// inboxSubjects are the inbox subjects of the session's addresses: its
// claimed ones and those committed but not yet claimed.
func (s *Server) inboxSubjects(cp wire.Checkpoint) []string {
	var out []string
	for _, addr := range append(slices.Clone(cp.Tokens), cp.PendingAliases...) {
		if tok, err := subjects.EncodeToken(addr); err == nil {
			out = append(out, s.cfg.Names.Inbox(tok))
		}
	}
	return out
}

// commandIDOf is the id of an inbox payload, or "" when it has none.
func commandIDOf(b []byte) string {
	if c, err := wire.Decode(b); err == nil {
		return c.ID
	}
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(b, &v) == nil {
		return v.ID
	}
	return ""
}

// outcomeData is what the outcome events' data say of their command.
type outcomeData struct {
	Seq       uint64 `json:"seq"`
	CommandID string `json:"commandId"`
	Reason    string `json:"reason"`
	By        uint64 `json:"by"`
}

// outcomeHit is an outcome event found: its status and seq, and its data.
type outcomeHit struct {
	outcomeData
	status   string
	eventSeq uint64
}

// errOutcomeFound stops a read at the outcome event.
var errOutcomeFound = errors.New("ingress: outcome found")

// matchOutcome reads a stored event (its envelope) as the outcome of the
// command at inbox sequence seq.
func matchOutcome(kind string, envelope []byte, seq uint64) (outcomeHit, bool) {
	if _, ok := OutcomeStatus(kind); !ok {
		return outcomeHit{}, false
	}
	var env struct {
		Seq  uint64          `json:"seq"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(envelope, &env) != nil {
		return outcomeHit{}, false
	}
	return matchData(kind, env.Seq, env.Data, seq)
}

// matchData reads the data of event eventSeq of kind as the outcome of
// the command at inbox sequence seq.
func matchData(kind string, eventSeq uint64, data []byte, seq uint64) (outcomeHit, bool) {
	status, ok := OutcomeStatus(kind)
	if !ok {
		return outcomeHit{}, false
	}
	var d outcomeData
	if json.Unmarshal(data, &d) != nil || d.Seq != seq {
		return outcomeHit{}, false
	}
	return outcomeHit{outcomeData: d, status: status, eventSeq: eventSeq}, true
}

// findOutcome looks for the outcome event of inbox sequence seq: in the
// outbox of the record's last commit (committed events possibly not on
// the stream yet), then among the session's events on the stream, newest
// first, MaxOutcomeScan at most. scanned counts the stream events read;
// exhaustive says every event of the session was read.
func (s *Server) findOutcome(ctx context.Context, a *attached, id string, seq uint64, outbox []wire.Event) (hit outcomeHit, scanned int, exhaustive bool, err error) {
	for _, ev := range outbox {
		if h, ok := matchData(ev.Kind, ev.Seq, ev.Data, seq); ok {
			return h, 0, false, nil
		}
	}
	subject := s.cfg.Names.Events(id)
	last, err := kv.NewStream(s.cfg.JS, s.cfg.Names.EventsStream()).Last(ctx, subject)
	if errors.Is(err, record.ErrNotFound) {
		return outcomeHit{}, 0, true, nil // no event yet
	}
	if err != nil {
		return outcomeHit{}, 0, false, err
	}
	top, ok := toEvent(last.Sequence, last.Header, last.Data)
	if !ok {
		return outcomeHit{}, 0, false, fmt.Errorf("the last event of %s (stream seq %d) has no seq", subject, last.Sequence)
	}
	hi, window := top.seq, uint64(outcomeFirstWindow)
	for hi > 0 && scanned < MaxOutcomeScan {
		n := min(window, hi, uint64(MaxOutcomeScan-scanned))
		lo := hi - n + 1
		rd := &reader{stream: a.events, subject: subject}
		err := rd.readRetry(ctx, lo, hi, func(ev event) error {
			if h, ok := matchOutcome(ev.kind, ev.data, seq); ok {
				hit = h
				return errOutcomeFound
			}
			return nil
		})
		if errors.Is(err, errOutcomeFound) {
			return hit, scanned + int(hit.eventSeq-lo) + 1, false, nil
		}
		if err != nil {
			return outcomeHit{}, scanned, false, err
		}
		scanned += int(n)
		hi = lo - 1
		window = min(window*2, outcomeMaxWindow)
	}
	return outcomeHit{}, scanned, hi == 0, nil
}
