package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives one machine from script directives, playing the driver.
type harness struct {
	t         *testing.T
	cfg       runtime.Config
	m         *runtime.Machine
	committed runtime.Snapshot
	pending   *runtime.Snapshot
	stream    []runtime.Command
	run       *runtime.RunStep
	log       *execlog.MemLog
	runs      int
	trigger   *runtime.Handoff // the last Handoff effect
}

// handoffDone builds the answer to the pending handoff: `handoff moved`,
// `handoff skip=queued`, or `handoff failed [reason="step: why"]` (a
// failed transaction, recorded as handoff.started + handoff.failed).
func (h *harness) handoffDone(args map[string]string) runtime.HandoffDone {
	d := runtime.HandoffDone{Moved: args["_0"] == "moved", SkipReason: args["skip"], HandoffID: or(args["id"], "h1")}
	if args["_0"] == "failed" {
		d.Failure = or(args["reason"], "start: no responders")
	}
	return d
}

func newHarness(t *testing.T) *harness { return &harness{t: t, log: &execlog.MemLog{}} }

// do runs one directive and returns its output.
func (h *harness) do(line string) string {
	name, args := parseArgs(line)
	var effs []runtime.Effect
	var err error
	switch name {
	case "new":
		h.stream, h.committed = nil, runtime.Snapshot{}
		err = h.newMachine(args, runtime.Snapshot{})
	case "boot":
		effs, err = h.handle(runtime.Boot{Now: at(args), Reason: runtime.BootReason(or(args["reason"], "new"))})
	case "recv":
		effs, err = h.recv(args)
	case "step":
		effs, err = h.step(args)
	case "commit":
		effs, err = h.handle(runtime.CommitDone{Outcome: outcomes[or(args["_0"], "ok")]})
	case "handoff":
		effs, err = h.handle(h.handoffDone(args))
	case "tick":
		effs, err = h.handle(runtime.Tick{Now: at(args)})
	case "expire":
		effs, err = h.handle(runtime.IdleExpire{})
	case "crash":
		return h.crash(args)
	case "state":
		return h.state()
	default:
		h.t.Fatalf("unknown directive %q", line)
	}
	return h.format(effs, err)
}

var outcomes = map[string]runtime.CommitOutcome{
	"ok": runtime.CommitOK, "conflict": runtime.CommitConflict, "uncertain": runtime.CommitUncertain,
}

func (h *harness) newMachine(args map[string]string, snap runtime.Snapshot) error {
	h.runs++
	timeout, _ := time.ParseDuration(args["timeout"])
	h.cfg = runtime.Config{
		SessionID: or(args["session"], "s1"), RunID: "r" + strconv.Itoa(h.runs),
		Deployment: or(args["dep"], or(h.cfg.Deployment, "A")), Timeout: timeout,
		EventKinds: (&demo.Agent{}).EventKinds(), Retry: retryPolicy(args, h.cfg.Retry),
	}
	m, err := runtime.NewMachine(h.cfg, snap)
	h.m, h.run, h.pending = m, nil, nil
	return err
}

// handle feeds one input and tracks the driver-side state the effects imply.
func (h *harness) handle(in runtime.Input) ([]runtime.Effect, error) {
	effs, err := h.m.Handle(in)
	if cd, ok := in.(runtime.CommitDone); ok && err == nil && cd.Outcome == runtime.CommitOK {
		h.committed, h.pending = *h.pending, nil
	}
	for _, e := range effs {
		switch e := e.(type) {
		case runtime.Commit:
			h.pending = &e.Snapshot
		case runtime.RunStep:
			h.run = &e
		case runtime.Handoff:
			h.trigger = &e
		}
	}
	return effs, err
}

func (h *harness) recv(args map[string]string) ([]runtime.Effect, error) {
	seq, _ := strconv.ParseUint(args["_0"], 10, 64)
	c := runtime.Command{
		Seq: seq, ID: args["_1"], Kind: runtime.Kind(args["_2"]), Mode: args["mode"],
		Caller: args["caller"], Deployment: or(args["dep"], h.cfg.Deployment), Text: args["text"],
		RequestID: args["req"], AttemptID: args["attempt"], AuthResult: args["result"],
		TaskID: args["task"], TimerID: args["timer"], Target: args["target"], Force: args["force"] == "true", Rejected: args["rejected"],
		Refused: args["refused"], EndMessage: args["message"], DefaultMode: args["default"],
	}
	c.DebounceMs, _ = strconv.ParseInt(args["debounce"], 10, 64)
	c.DefaultDebounceMs, _ = strconv.ParseInt(args["defaultDebounce"], 10, 64)
	if v, ok := args["value"]; ok {
		c.Value = []byte(strconv.Quote(v))
	}
	if c.Kind == runtime.KindTag { // set=k:v,k2:v2 remove=k3,k4
		c.Tag = &wire.Tag{}
		for kv := range strings.SplitSeq(args["set"], ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				if c.Tag.Set == nil {
					c.Tag.Set = map[string]string{}
				}
				c.Tag.Set[k] = v
			}
		}
		for k := range strings.SplitSeq(args["remove"], ",") {
			if k != "" {
				c.Tag.Remove = append(c.Tag.Remove, k)
			}
		}
	}
	h.stream = append(h.stream, c)
	var now time.Time
	if _, ok := args["at"]; ok {
		now = at(args)
	}
	return h.handle(runtime.Received{Cmd: c, Now: now})
}

// retryPolicy reads `retries=N backoff=1s,5s` of a new (or crashed)
// machine; without them, the previous machine's policy.
func retryPolicy(args map[string]string, prev runtime.RetryPolicy) runtime.RetryPolicy {
	n, ok := args["retries"]
	if !ok {
		return prev
	}
	p := runtime.RetryPolicy{}
	p.Retries, _ = strconv.Atoi(n)
	for b := range strings.SplitSeq(args["backoff"], ",") {
		if d, err := time.ParseDuration(b); err == nil {
			p.Backoff = append(p.Backoff, d)
		}
	}
	return p
}

// step runs the demo agent on the running step; "cancelled" runs it with a
// cancelled context, as after a CancelStep; `fail=CODE` does not run it:
// the step fails with that code (a remote worker's death, a panic, …).
func (h *harness) step(args map[string]string) ([]runtime.Effect, error) {
	if h.run == nil {
		return nil, errors.New("harness: no step running")
	}
	if code, ok := args["fail"]; ok {
		in := h.run.Input
		h.run = nil
		return h.handle(runtime.StepDone{TurnID: in.TurnID, Step: in.Step,
			Result: runtime.Failed(code, errors.New("step failed: "+code))})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if args["_0"] == "cancelled" {
		cancel()
	}
	defer cancel()
	a := &demo.Agent{Log: h.log, Process: h.cfg.RunID, Sleep: sleepNow}
	done, _ := runtime.Run(ctx, a, h.run.Input)
	if calls := args["calls"]; calls != "" { // the journaled calls the step made
		done.Calls = strings.Split(calls, ",")
	}
	h.run = nil
	return h.handle(done)
}

func sleepNow(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// crash rebuilds the machine from the last committed snapshot, boots it and
// replays the stream from Applied.Next, as a driver does on recovery.
func (h *harness) crash(args map[string]string) string {
	prev := h.cfg.Deployment
	if err := h.newMachine(args, h.committed); err != nil {
		return "error: " + err.Error() + "\n"
	}
	reason := runtime.BootReason(or(args["reason"], "recover"))
	b := runtime.Boot{Now: at(args), Reason: reason}
	if reason == runtime.BootHandoff && h.trigger != nil {
		t := h.trigger.Trigger
		b.Handoff = &runtime.HandoffInfo{ID: or(args["id"], "h1"), From: prev,
			Trigger: runtime.Ref{Seq: t.Seq, ID: t.ID}, Epoch: uint64(h.runs)}
	}
	if reason == runtime.BootAdopt {
		b.Adopt = &runtime.AdoptInfo{ID: or(args["id"], "a1"), From: prev, Epoch: uint64(h.runs), Force: args["force"] == "true"}
	}
	effs, err := h.handle(b)
	out := h.format(effs, err)
	for _, c := range h.stream {
		if c.Seq >= h.committed.Applied.Next {
			effs, err := h.handle(runtime.Received{Cmd: c})
			out += fmt.Sprintf("> recv %d\n", c.Seq) + h.format(effs, err)
		}
	}
	return out
}

func (h *harness) state() string {
	s := h.m.Snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "idle=%q queued=%s paused=%v ended=%q\n", h.m.IdleReason(), seqs(h.m.Queued()), s.Paused, s.Ended)
	if t := s.Turn; t != nil {
		fmt.Fprintf(&b, "turn %s caller=%q steps=%d open=%v inputs=%s\n", t.ID, t.Caller, t.Steps, t.Open, ids(t.Inputs))
		if bf := t.Before; len(t.Calls) > 0 || bf != nil && bf.State != nil {
			fmt.Fprintf(&b, "before state=%s history=%d calls=%v\n", t.Before.State, t.Before.HistoryLen, t.Calls)
		}
	}
	if w := s.Debounce; w != nil {
		fmt.Fprintf(&b, "debounce opened=%s until=%s timer=%s inputs=%s\n", w.OpenedAt.Sub(epoch), w.Until.Sub(epoch), w.TimerID, ids(w.Inputs))
	}
	if s.Usage != (runtime.Usage{}) {
		fmt.Fprintf(&b, "usage in=%d out=%d\n", s.Usage.InputTokens, s.Usage.OutputTokens)
	}
	if s.DefaultMode != "" {
		fmt.Fprintf(&b, "default mode=%s debounce=%d\n", s.DefaultMode, s.DefaultDebounceMs)
	}
	fmt.Fprintf(&b, "waits input=%v auth=%v tasks=%d\n", s.Waits.Input != nil, s.Waits.Auth != nil, len(s.Waits.Tasks))
	fmt.Fprintf(&b, "applied next=%d above=%v history=%d aliases=%v\n", s.Applied.Next, s.Applied.Above, len(s.History), s.Aliases)
	if len(s.Tags) > 0 {
		fmt.Fprintf(&b, "tags %v\n", s.Tags) // fmt prints a map sorted by key
	}
	return b.String()
}

// parseArgs splits `name a b key=value key="quoted value"`; positional
// arguments are _0, _1, ...
func parseArgs(line string) (string, map[string]string) {
	var toks []string
	var cur strings.Builder
	quoted := false
	for _, r := range line + " " {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				toks, cur = append(toks, cur.String()), strings.Builder{}
			}
		default:
			cur.WriteRune(r)
		}
	}
	args, pos := map[string]string{}, 0
	for _, tok := range toks[1:] {
		if k, v, ok := strings.Cut(tok, "="); ok {
			args[k] = v
			continue
		}
		args["_"+strconv.Itoa(pos)] = tok
		pos++
	}
	return toks[0], args
}

func at(args map[string]string) time.Time {
	d, _ := time.ParseDuration(or(args["at"], "0s"))
	return epoch.Add(d)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func seqs(cs []runtime.Command) string {
	var s []string
	for _, c := range cs {
		s = append(s, strconv.FormatUint(c.Seq, 10))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func ids(cs []runtime.Command) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.ID)
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}
