package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/wire"
)

// Subagents. A step delegates a message to a child session through a named
// handle ([Delegate]); the runtime creates the child on the exact
// deployment (first use of the handle), delivers the message after the
// commit, and the child's result returns as a child.result command,
// applied once. The rules are in docs/runtime.md, "Subagents".

// Delegate is a step's delegation: a message (Text, or Payloads as a
// channel would send them) for the child held by Handle. A handle that has
// no open child gets a new one on DeploymentID (exact; the parent's own
// when empty); a parked handle's child gets the message as its next turn.
// With Wait the parent's turn parks until the child's result arrives (like
// a task wait), which its next step sees; without it the turn goes on (or
// completes) and the result arrives later as a coordination input.
//
// A new child starts with the parent's tags, or with Tags when it is not
// nil (an empty, non-nil map: none). Tags are a new child's only: a
// delegation to an open handle leaves its child's tags as they are.
type Delegate struct {
	Handle       string            `json:"handle"`
	DeploymentID string            `json:"deploymentId,omitempty"`
	Text         string            `json:"text,omitempty"`
	Payloads     []wire.Payload    `json:"payloads,omitempty"`
	Wait         bool              `json:"wait,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// ChildTags are the tags a new child of d starts with when its parent has
// parentTags: d.Tags when set, else the parent's.
func (d *Delegate) ChildTags(parentTags map[string]string) map[string]string {
	if d.Tags != nil {
		if len(d.Tags) == 0 {
			return nil
		}
		return maps.Clone(d.Tags)
	}
	return maps.Clone(parentTags)
}

// Handle, ChildWait, ParentRef and Send are the checkpoint's shapes (wire's).
type (
	// Handle is one child handle of a session.
	Handle = wire.HandleState
	// ChildWait is a descendant's outstanding wait.
	ChildWait = wire.ChildWait
	// ParentRef is a child's parent.
	ParentRef = wire.ParentRef
	// Send is a committed command for another session.
	Send = wire.Send
	// PendingSend is a child-creating send that has not left yet.
	PendingSend = wire.PendingSend
)

// Delegation codes (failed steps).
const (
	CodeHandleLimit      = wire.CodeHandleLimit
	CodeDepthLimit       = wire.CodeDepthLimit
	CodeChildUnsupported = wire.CodeChildUnsupported
	CodeHandleBusy       = wire.CodeHandleBusy
	CodeHandleUnknown    = wire.CodeHandleUnknown
	CodeDelegateInvalid  = wire.CodeDelegateInvalid
	CodeChildUnavailable = wire.CodeChildUnavailable
)

// maxHandleNames bounds the handle entries a checkpoint keeps (closed ones
// keep their generation so a reused name gets a new child).
const maxHandleNames = 8 * wire.MaxHandles

// maxChildWaits bounds a session's outstanding descendant waits.
const maxChildWaits = 64

// maxOutputBytes bounds the output text a delegated turn reports.
const maxOutputBytes = wire.MaxDelegateBytes

var handleRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// depth is the session's delegation depth: 0 for a root.
func (m *Machine) depth() int {
	if p := m.snap.Parent; p != nil {
		return p.Depth
	}
	return 0
}

func (m *Machine) handleIndex(name string) int {
	return slices.IndexFunc(m.snap.Handles, func(h Handle) bool { return h.Handle == name })
}

// openHandles counts the handles that are not closed.
func (m *Machine) openHandles() int {
	n := 0
	for _, h := range m.snap.Handles {
		if h.State != wire.HandleClosed {
			n++
		}
	}
	return n
}

// activeChildren is what keeps the session busy with its children.
func (m *Machine) activeChildren() int { return wire.ActiveChildren(m.snap.Handles, m.snap.ChildWaits) }

// waitsOnChild reports whether turn t is parked on a child's result.
func (m *Machine) waitsOnChild(t *Turn) bool {
	return slices.ContainsFunc(m.snap.Handles, func(h Handle) bool {
		return h.State == wire.HandleActive && h.Wait && h.TurnID == t.ID
	})
}

// checkChildren refuses a result whose delegation or closes cannot be
// done: the code and error of the failed step.
func (m *Machine) checkChildren(t *Turn, r StepResult) (string, error) {
	for _, name := range r.Close {
		if i := m.handleIndex(name); i < 0 || m.snap.Handles[i].State == wire.HandleClosed {
			return CodeHandleUnknown, fmt.Errorf("close: no open handle %q", name)
		}
	}
	d := r.Delegate
	if d == nil {
		return "", nil
	}
	if r.Outcome != OutcomeContinue && r.Outcome != OutcomeDone {
		return CodeResultInvalid, fmt.Errorf("delegate: outcome %q (want continue or done)", r.Outcome)
	}
	if err := m.checkDelegate(d, r.Close); err != nil {
		return CodeDelegateInvalid, err
	}
	if m.depth()+1 > wire.MaxDepth {
		return CodeDepthLimit, fmt.Errorf("delegate: this session is at delegation depth %d, the limit", m.depth())
	}
	if code, err := m.checkHandle(d); err != nil {
		return code, err
	}
	if _, err := wire.Encode(wire.Current(), m.delegation(t, d, Handle{Handle: d.Handle, Generation: 1})); err != nil {
		return CodeDelegateInvalid, fmt.Errorf("delegate: %w", err)
	}
	return "", nil
}

// checkHandle checks that d's handle can take a delegation: an open one
// that is parked (and on d's deployment), or room for a new one.
func (m *Machine) checkHandle(d *Delegate) (string, error) {
	if i := m.handleIndex(d.Handle); i >= 0 && m.snap.Handles[i].State != wire.HandleClosed {
		return m.checkContinue(m.snap.Handles[i], d)
	}
	if m.openHandles() >= wire.MaxHandles {
		return CodeHandleLimit, fmt.Errorf("delegate: %d open handles, the limit (close one)", wire.MaxHandles)
	}
	if m.handleIndex(d.Handle) < 0 && len(m.snap.Handles) >= maxHandleNames {
		return CodeHandleLimit, fmt.Errorf("delegate: %d handle names used (reuse a closed name)", maxHandleNames)
	}
	return "", nil
}

func (m *Machine) checkDelegate(d *Delegate, closing []string) error {
	switch {
	case !handleRE.MatchString(d.Handle):
		return fmt.Errorf("delegate: handle %q must match [A-Za-z0-9_-]{1,64}", d.Handle)
	case d.DeploymentID != "" && (d.DeploymentID == "latest" || !handleRE.MatchString(d.DeploymentID)):
		return fmt.Errorf("delegate: deploymentId %q is not an exact deployment", d.DeploymentID)
	case (d.Text == "") == (len(d.Payloads) == 0):
		return fmt.Errorf("delegate: exactly one of text and payloads")
	case slices.Contains(closing, d.Handle):
		return fmt.Errorf("delegate: handle %q is closed by the same step", d.Handle)
	}
	if err := wire.ValidateTags(d.Tags); err != nil {
		return fmt.Errorf("delegate: tags: %w", err)
	}
	b, _ := json.Marshal(delegatePayloads(d))
	if len(b) > wire.MaxDelegateBytes {
		return fmt.Errorf("delegate: message of %d bytes, limit %d", len(b), wire.MaxDelegateBytes)
	}
	return nil
}

// checkContinue checks a delegation to an open handle: parked, and on the
// deployment the delegation names (if any).
func (m *Machine) checkContinue(h Handle, d *Delegate) (string, error) {
	if h.State == wire.HandleActive {
		return CodeHandleBusy, fmt.Errorf("delegate: handle %q has an active delegated turn", h.Handle)
	}
	if d.DeploymentID != "" && d.DeploymentID != h.DeploymentID {
		return CodeDelegateInvalid, fmt.Errorf("delegate: handle %q holds a child on %s, not %s", h.Handle, h.DeploymentID, d.DeploymentID)
	}
	return "", nil
}

func delegatePayloads(d *Delegate) []wire.Payload {
	if len(d.Payloads) > 0 {
		return d.Payloads
	}
	return []wire.Payload{{Message: wire.TextMessage(d.Text)}}
}

// delegation is the delivery of d to h's child: stamped by this session's
// runtime (parentSessionId, handle, the child's depth), its ID the step's.
func (m *Machine) delegation(t *Turn, d *Delegate, h Handle) wire.Command {
	c := m.toChild(wire.KindDeliver, m.cfg.SessionID+"/"+t.ID+"/"+itoa(t.Steps)+"/delegate", h)
	c.Deliver = &wire.Deliver{Mode: wire.ModeQueue, Payloads: delegatePayloads(d)}
	return c
}

// toChild is a command of this session's runtime for h's child.
func (m *Machine) toChild(k Kind, id string, h Handle) wire.Command {
	return wire.Command{
		V: wire.CurrentVersion, Kind: k, ID: id,
		AcceptedDeploymentID: m.cfg.Deployment, AcceptedAt: m.now.UTC(),
		ParentSessionID: m.cfg.SessionID, Handle: h.Handle, Depth: m.depth() + 1,
	}
}

// toParent is a command of this (child) session's runtime for its parent,
// its ID <this session>/<suffix> (bounded).
func (m *Machine) toParent(k Kind, suffix string) wire.Command {
	return wire.Command{V: wire.CurrentVersion, Kind: k, ID: commandID(m.cfg.SessionID + "/" + suffix),
		AcceptedDeploymentID: m.cfg.Deployment, AcceptedAt: m.now.UTC()}
}

func (m *Machine) send(to string, c wire.Command) {
	m.st.sends = append(m.st.sends, Send{SessionID: to, Command: c})
}

// applyChildren applies a folded step's closes and delegation; it reports
// whether the turn now waits for the child's result.
func (m *Machine) applyChildren(t *Turn, r StepResult) bool {
	for _, name := range r.Close {
		m.closeHandle(m.handleIndex(name))
	}
	d := r.Delegate
	if d == nil {
		return false
	}
	i, created := m.openHandle(d)
	h := &m.snap.Handles[i]
	c := m.delegation(t, d, *h)
	h.State, h.TurnID, h.CommandID, h.Wait = wire.HandleActive, t.ID, c.ID, d.Wait
	s := Send{SessionID: h.ChildSessionID, Command: c}
	if created {
		s.DeploymentID, s.Alias = h.DeploymentID, wire.ChildAlias(m.cfg.SessionID, h.Handle, h.Generation)
		s.Tags = d.ChildTags(m.snap.Tags)
		m.emit(wire.ChildStarted{Handle: h.Handle, ChildSessionID: h.ChildSessionID, DeploymentID: h.DeploymentID})
	}
	m.st.sends = append(m.st.sends, s)
	return d.Wait
}

// openHandle returns d's handle: the open one, or a new generation.
func (m *Machine) openHandle(d *Delegate) (int, bool) {
	i := m.handleIndex(d.Handle)
	if i >= 0 && m.snap.Handles[i].State != wire.HandleClosed {
		return i, false
	}
	gen := 1
	if i >= 0 {
		gen = m.snap.Handles[i].Generation + 1
	}
	h := Handle{Handle: d.Handle, Generation: gen, DeploymentID: cmp.Or(d.DeploymentID, m.cfg.Deployment),
		ChildSessionID: wire.ChildSessionID(m.cfg.SessionID, d.Handle, gen)}
	if i >= 0 {
		m.snap.Handles[i] = h
		return i, true
	}
	m.snap.Handles = append(m.snap.Handles, h)
	return len(m.snap.Handles) - 1, true
}

// closeHandle ends handle i's child (end) and closes it (child.closed).
func (m *Machine) closeHandle(i int) {
	if i < 0 || m.snap.Handles[i].State == wire.HandleClosed {
		return
	}
	h := &m.snap.Handles[i]
	m.dropPending(h.CommandID)
	m.send(h.ChildSessionID, m.toChild(KindEnd, wire.CloseCommandID(m.cfg.SessionID, h.Handle, h.Generation), *h))
	h.State, h.TurnID, h.CommandID, h.Wait = wire.HandleClosed, "", "", false
	m.dropChildWaits(h.Handle)
	m.emit(wire.ChildClosed{Handle: h.Handle, ChildSessionID: h.ChildSessionID})
}

// closeHandles closes every open handle (reset, clear, the session's end).
func (m *Machine) closeHandles() {
	for i := range m.snap.Handles {
		m.closeHandle(i)
	}
}

// cancelChildren sends cancel to the active children turn t started; each
// stays active until its (cancelled) result arrives, but t no longer waits.
func (m *Machine) cancelChildren(t *Turn) {
	for i := range m.snap.Handles {
		h := &m.snap.Handles[i]
		if h.State == wire.HandleActive && h.TurnID == t.ID && !m.abandonPending(i) {
			h.Wait = false
			m.send(h.ChildSessionID, m.toChild(KindCancel, m.cfg.SessionID+"/"+t.ID+"/cancel/"+h.Handle+"."+itoa(h.Generation), *h))
		}
	}
	m.st.dirty = true
}

func (m *Machine) dropChildWaits(handle string) {
	m.snap.ChildWaits = slices.DeleteFunc(m.snap.ChildWaits, func(w ChildWait) bool { return w.Handle == handle })
	if len(m.snap.ChildWaits) == 0 {
		m.snap.ChildWaits = nil
	}
}

// childResult settles the active handle whose delegation c answers: it
// parks (closed if the child ended), the result joins the turn that
// waits for it (or the open turn, else the history), and the child's usage
// counts for this session's turn. Any other result (stale, repeated, for a
// closed handle) is applied with no effect.
func (m *Machine) childResult(c Command) {
	ch := c.Child
	if ch == nil {
		return
	}
	i := slices.IndexFunc(m.snap.Handles, func(h Handle) bool {
		return h.Handle == ch.Handle && h.State == wire.HandleActive && h.CommandID == ch.CommandID
	})
	if i < 0 {
		return
	}
	h := &m.snap.Handles[i]
	waited := h.Wait
	turnID := h.TurnID
	m.dropPending(h.CommandID)
	h.State, h.TurnID, h.CommandID, h.Wait = wire.HandleParked, "", "", false
	m.dropChildWaits(h.Handle)
	m.emit(wire.LowestChildCompleted(wire.ChildCompleted{Handle: h.Handle, ChildSessionID: h.ChildSessionID, TurnID: ch.TurnID, Outcome: ch.Outcome},
		wire.ChildErrorOf(ch.Outcome, ch.Error)))
	if ch.Ended != "" {
		h.State = wire.HandleClosed
		m.emit(wire.ChildClosed{Handle: h.Handle, ChildSessionID: h.ChildSessionID})
	}
	m.childUsage(ch.Usage)
	t := m.snap.Turn
	switch {
	case t != nil && waited && t.ID == turnID && !t.Open:
		t.Open = true
		m.join(c)
	case t != nil && t.Open:
		m.join(c)
	default:
		m.remember(c)
	}
}

// childUsage adds a child's turn's usage to the live turn's and the
// session's.
func (m *Machine) childUsage(u Usage) {
	if t := m.snap.Turn; t != nil {
		m.addUsage(t, u)
		return
	}
	if u != (Usage{}) {
		m.snap.Usage = m.snap.Usage.Add(u)
	}
}

// childWaiting records a descendant's wait on an active handle
// (child.waiting) and passes it on to this session's parent.
func (m *Machine) childWaiting(c Command) {
	ch := c.Child
	if ch == nil || !m.activeHandle(ch.Handle) {
		return
	}
	w := ChildWait{Handle: ch.Handle, ChildSessionID: ch.SessionID, RequestID: c.RequestID, AttemptID: c.AttemptID, Question: ch.Question}
	m.removeChildWait(w)
	if len(m.snap.ChildWaits) >= maxChildWaits {
		return
	}
	m.snap.ChildWaits = append(m.snap.ChildWaits, w)
	m.emit(wire.ChildWaitingEvent(w))
	m.forwardWait(KindChildWaiting, c.ID, w)
}

// childResumed drops the descendant's wait c names and passes it on.
func (m *Machine) childResumed(c Command) {
	ch := c.Child
	if ch == nil {
		return
	}
	w := ChildWait{Handle: ch.Handle, ChildSessionID: ch.SessionID, RequestID: c.RequestID, AttemptID: c.AttemptID}
	if m.removeChildWait(w) {
		m.st.dirty = true
		m.forwardWait(KindChildResumed, c.ID, w)
	}
}

func (m *Machine) removeChildWait(w ChildWait) bool {
	n := len(m.snap.ChildWaits)
	m.snap.ChildWaits = slices.DeleteFunc(m.snap.ChildWaits, func(o ChildWait) bool {
		return o.Handle == w.Handle && o.ChildSessionID == w.ChildSessionID && o.RequestID == w.RequestID && o.AttemptID == w.AttemptID
	})
	if len(m.snap.ChildWaits) == 0 {
		m.snap.ChildWaits = nil
	}
	return len(m.snap.ChildWaits) != n
}

func (m *Machine) activeHandle(name string) bool {
	i := m.handleIndex(name)
	return i >= 0 && m.snap.Handles[i].State == wire.HandleActive
}

// forwardWait passes a descendant's wait (or its end) to this session's
// parent while a delegated turn runs here: the root sees every wait below
// it, named by the session that waits.
func (m *Machine) forwardWait(k Kind, id string, w ChildWait) {
	t, p := m.snap.Turn, m.snap.Parent
	if t == nil || !t.Delegated || p == nil {
		return
	}
	c := m.toParent(k, "fwd/"+id)
	body := &wire.ChildWaiting{Handle: p.Handle, ChildSessionID: w.ChildSessionID, RequestID: w.RequestID, AttemptID: w.AttemptID, Question: w.Question}
	if k == KindChildWaiting {
		c.ChildWaiting = body
	} else {
		c.ChildResumed = body
	}
	m.send(p.SessionID, c)
}

// The child side: a parent's delivery starts a delegated turn; its waits
// and its settlement go back to the parent.

// adoptParent records the parent of a delivery c that a parent sent, at
// the first one, and marks turn t delegated.
func (m *Machine) adoptParent(t *Turn, c Command) {
	p := c.Parent
	if p == nil {
		return
	}
	if m.snap.Parent == nil {
		ref := *p
		m.snap.Parent = &ref
	}
	if m.snap.Parent.SessionID == p.SessionID {
		t.Delegated, t.CommandID = true, c.ID
	}
}

// collectOutputs keeps a delegated turn's message.output texts (bounded)
// for its child.result.
func (m *Machine) collectOutputs(t *Turn, events []Event) {
	if !t.Delegated {
		return
	}
	used := 0
	for _, o := range t.Outputs {
		used += len(o)
	}
	for _, e := range events {
		if e.Kind != EventMessageOutput {
			continue
		}
		var out wire.MessageOutput
		if json.Unmarshal(e.Data, &out) != nil || out.Text == "" {
			continue
		}
		text := out.Text
		if used+len(text) > maxOutputBytes {
			text = text[:max(0, maxOutputBytes-used)] + "…(truncated)"
		}
		used += len(text)
		t.Outputs = append(t.Outputs, text)
		if used >= maxOutputBytes {
			return
		}
	}
}

// reportTurn sends a delegated turn's settlement to the parent, once.
func (m *Machine) reportTurn(t *Turn, outcome, errText, ended string) {
	p := m.snap.Parent
	if t == nil || !t.Delegated || p == nil {
		return
	}
	t.Delegated = false
	c := m.toParent(KindChildResult, "")
	c.ID = wire.ResultCommandID(m.cfg.SessionID, t.ID)
	c.ChildResult = &wire.ChildResult{
		Handle: p.Handle, ChildSessionID: m.cfg.SessionID, CommandID: t.CommandID, TurnID: t.ID,
		Outcome: outcome, Outputs: slices.Clone(t.Outputs), Usage: t.Usage, Error: clipText(errText, 4096), Ended: ended,
	}
	m.send(p.SessionID, c)
}

// reportWait tells the parent that the delegated turn t waits (requestId
// or attemptId), or with resumed that it no longer does.
func (m *Machine) reportWait(t *Turn, requestID, attemptID, question string, resumed bool) {
	p := m.snap.Parent
	if t == nil || !t.Delegated || p == nil {
		return
	}
	body := &wire.ChildWaiting{Handle: p.Handle, ChildSessionID: m.cfg.SessionID, RequestID: requestID, AttemptID: attemptID}
	if resumed {
		c := m.toParent(KindChildResumed, t.ID+"/resumed/"+requestID+attemptID)
		c.ChildResumed = body
		m.send(p.SessionID, c)
		return
	}
	body.Question = question
	c := m.toParent(KindChildWaiting, t.ID+"/waiting/"+requestID+attemptID)
	c.ChildWaiting = body
	m.send(p.SessionID, c)
}

// ChildResultText is how a child.result reads (its history entry; the
// demo agent's output): "child <handle>: <the outputs, one per line>", the
// outcome in parentheses when it is not done, then the error if any.
func ChildResultText(ch *wire.ChildRef) string {
	if ch == nil {
		return "child result"
	}
	head := "child " + ch.Handle
	if ch.Outcome != wire.ChildDone {
		head += " (" + ch.Outcome + ")"
	}
	return head + ": " + strings.TrimSpace(strings.Join(ch.Outputs, "\n")+" "+ch.Error)
}

// commandID keeps a derived command ID within wire's 128 characters: a
// longer one keeps its first 100 and a hash of the whole.
func commandID(id string) string {
	if len(id) <= 128 {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return id[:100] + "~" + strconv.FormatUint(h.Sum64(), 36)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
