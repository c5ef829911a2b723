package wire

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"
)

// sessionRE is the form of a session ID (checkpoints).
var sessionRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// The rules below are the runtime validation of every shape: they check
// everything the frozen JSON Schema states (lengths, enumerations, patterns,
// kind ↔ body) and what a schema cannot say (`latest`, zero times). What the
// schema states about the JSON text itself — exact member names, no unknown
// member, no null, required members, minLength of an optional member — is
// checked by the typed decoders (typed.go, shape.go), since it is gone
// once a value is in its Go type. TestSchemaAgreement and
// FuzzSchemaAgreement hold the two together to the schema.

// validDeployment mirrors subjects.ValidateDeployment (wire is a leaf and
// imports no project package): [A-Za-z0-9_-]{1,64} and never "latest".
func validDeployment(id string) error {
	switch {
	case id == "":
		return errors.New("deployment ID is empty")
	case len(id) == len("latest") && bytes.EqualFold([]byte(id), []byte("latest")):
		return fmt.Errorf("deployment ID %q is not an exact deployment", id)
	case len(id) > 64 || !idChars(id):
		return fmt.Errorf("deployment ID %q must match [A-Za-z0-9_-]{1,64}", id)
	}
	return nil
}

// idChars reports whether s is non-empty and matches [A-Za-z0-9_-]+.
func idChars(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return s != ""
}

// runeLen checks a schema length bound: 1..max Unicode code points (what
// JSON Schema's minLength and maxLength count).
func runeLen(name, s string, max int) error {
	if s == "" {
		return fmt.Errorf("%s is empty", name)
	}
	if len(s) > max && utf8.RuneCountInString(s) > max {
		return fmt.Errorf("%s is longer than %d characters", name, max)
	}
	return nil
}

// maxRunes checks an optional string's maxLength (code points).
func maxRunes(name, s string, max int) error {
	if len(s) > max && utf8.RuneCountInString(s) > max {
		return fmt.Errorf("%s is longer than %d characters", name, max)
	}
	return nil
}

// validTime rejects the zero time and times that cannot be encoded.
func validTime(name string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is not set", name)
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%s is out of range", name)
	}
	return nil
}

// validate checks the rules of the current shape.
func (c *Command) validate() *Error {
	body, ok := bodyOf[c.Kind]
	if !ok {
		return c.fail(ErrUnknownKind, "kind %q", c.Kind)
	}
	if err := c.validateEnvelope(); err != nil {
		return c.fail(ErrInvalid, "%v", err)
	}
	if n, set := c.body(); n > 1 || n == 1 && set != body || n == 0 && body != "" && !optionalBody[c.Kind] {
		var want []string
		if body != "" {
			want = []string{body}
		}
		return c.fail(ErrInvalid, "kind %q carries bodies %v, want %v", c.Kind, c.bodies(), want)
	}
	if err := c.validateBody(); err != nil {
		return c.fail(ErrInvalid, "%s: %v", body, err)
	}
	return nil
}

// body counts the bodies that are set and names the last one.
func (c *Command) body() (n int, name string) {
	count := func(set bool, body string) {
		if set {
			n, name = n+1, body
		}
	}
	count(c.Deliver != nil, "deliver")
	count(c.InputResponse != nil, "inputResponse")
	count(c.AuthCallback != nil, "authCallback")
	count(c.TaskResult != nil, "taskResult")
	count(c.Timeout != nil, "timeout")
	count(c.Move != nil, "move")
	count(c.ChildResult != nil, "childResult")
	count(c.ChildWaiting != nil, "childWaiting")
	count(c.ChildResumed != nil, "childResumed")
	count(c.Tag != nil, "tag")
	count(c.Terminate != nil, "terminate")
	count(c.Configure != nil, "configure")
	return n, name
}

func (c *Command) validateEnvelope() error {
	switch {
	case c.V != CurrentVersion:
		return fmt.Errorf("v is %d, want %d", c.V, CurrentVersion)
	case c.ID == "" || len(c.ID) > 128:
		return errors.New("id must be 1-128 bytes")
	case len(c.IdempotencyKey) > 256 || len(c.Caller) > 256:
		return errors.New("idempotencyKey and caller are at most 256 bytes")
	}
	if err := validDeployment(c.AcceptedDeploymentID); err != nil {
		return fmt.Errorf("acceptedDeploymentId: %w", err)
	}
	if err := all(c.validateParent(), c.validateTerminate(), c.validateConfigure()); err != nil {
		return err
	}
	return validTime("acceptedAt", c.AcceptedAt)
}

// validateParent: parentSessionId, handle and depth go together (a
// parent's command to its child), or none is set.
func (c *Command) validateParent() error {
	if c.ParentSessionID == "" && c.Handle == "" && c.Depth == 0 {
		return nil
	}
	if c.ParentSessionID == "" || c.Handle == "" || c.Depth == 0 {
		return errors.New("parentSessionId, handle and depth are all set or none")
	}
	if c.Depth < 1 || c.Depth > MaxDepth {
		return fmt.Errorf("depth %d is not in 1..%d", c.Depth, MaxDepth)
	}
	return all(idOf("parentSessionId", c.ParentSessionID, 128), idOf("handle", c.Handle, 64))
}

// idOf checks an identifier of the form [A-Za-z0-9_-]{1,max}.
func idOf(name, s string, max int) error {
	if len(s) > max || !idChars(s) {
		return fmt.Errorf("%s %q must match [A-Za-z0-9_-]{1,%d}", name, s, max)
	}
	return nil
}

// bodies lists the JSON names of the bodies that are set.
func (c *Command) bodies() []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(c.Deliver != nil, "deliver")
	add(c.InputResponse != nil, "inputResponse")
	add(c.AuthCallback != nil, "authCallback")
	add(c.TaskResult != nil, "taskResult")
	add(c.Timeout != nil, "timeout")
	add(c.Move != nil, "move")
	add(c.ChildResult != nil, "childResult")
	add(c.ChildWaiting != nil, "childWaiting")
	add(c.ChildResumed != nil, "childResumed")
	add(c.Tag != nil, "tag")
	add(c.Terminate != nil, "terminate")
	add(c.Configure != nil, "configure")
	return out
}

func (c *Command) validateBody() error {
	switch {
	case c.Deliver != nil:
		return c.Deliver.validate()
	case c.InputResponse != nil:
		return c.InputResponse.validate()
	case c.AuthCallback != nil:
		return c.AuthCallback.validate()
	case c.TaskResult != nil:
		return c.TaskResult.validate()
	case c.Timeout != nil:
		return c.Timeout.validate()
	case c.Move != nil:
		return validDeployment(c.Move.DeploymentID)
	case c.ChildResult != nil:
		return c.ChildResult.validate()
	case c.ChildWaiting != nil:
		return c.ChildWaiting.validate()
	case c.ChildResumed != nil:
		return c.ChildResumed.validate()
	case c.Tag != nil:
		return c.Tag.validate()
	case c.Terminate != nil:
		return c.Terminate.validate()
	case c.Configure != nil:
		return c.Configure.validate()
	}
	return nil
}

func (r *ChildResult) validate() error {
	return all(
		idOf("handle", r.Handle, 64), idOf("childSessionId", r.ChildSessionID, 128),
		runeLen("commandId", r.CommandID, 256), runeLen("turnId", r.TurnID, 128),
		oneOf("outcome", r.Outcome, ChildDone, ChildFailed, ChildCancelled),
		r.Usage.Validate(), maxRunes("ended", r.Ended, 64))
}

// validate checks a child.waiting or child.resumed body: exactly one of
// requestId and attemptId.
func (w *ChildWaiting) validate() error {
	if (w.RequestID == "") == (w.AttemptID == "") {
		return errors.New("exactly one of requestId and attemptId")
	}
	return all(
		idOf("handle", w.Handle, 64), idOf("childSessionId", w.ChildSessionID, 128),
		maxRunes("requestId", w.RequestID, 128), maxRunes("attemptId", w.AttemptID, 128))
}

func (d *Deliver) validate() error {
	if err := checkModeWindow("mode", d.Mode, "debounceMs", d.DebounceMs, true); err != nil {
		return err
	}
	if len(d.Payloads) == 0 {
		return errors.New("no payloads")
	}
	for i := range d.Payloads {
		if err := d.Payloads[i].validate(); err != nil {
			return fmt.Errorf("payload %d: %w", i, err)
		}
	}
	return nil
}

func (p *Payload) validate() error {
	if p.Message == nil && p.Context == nil && p.InputResponses == nil && p.OutputSchema == nil && p.Ext == nil {
		return errors.New("empty payload")
	}
	if p.Message != nil {
		if err := p.Message.validate(); err != nil {
			return err
		}
	}
	for i := range p.InputResponses {
		if err := p.InputResponses[i].validate(); err != nil {
			return err
		}
	}
	if p.OutputSchema != nil && !isObject(p.OutputSchema) {
		return errors.New("outputSchema must be a JSON object")
	}
	for k := range p.Ext {
		if k == "" {
			return errors.New("ext has an empty key")
		}
	}
	return nil
}

func (r *InputResponse) validate() error {
	return runeLen("requestId", r.RequestID, 128)
}

func (a *AuthCallback) validate() error {
	if err := runeLen("attemptId", a.AttemptID, 128); err != nil {
		return err
	}
	if a.Result != AuthGranted && a.Result != AuthDenied {
		return fmt.Errorf("result %q must be granted or denied", a.Result)
	}
	return nil
}

func (t *TaskResult) validate() error {
	if err := runeLen("taskId", t.TaskID, 128); err != nil {
		return err
	}
	if (t.Result == nil) == (t.Error == "") {
		return errors.New("exactly one of result and error")
	}
	return nil
}

func (t *Timeout) validate() error {
	if err := runeLen("timerId", t.TimerID, 128); err != nil {
		return err
	}
	return validTime("deadline", t.Deadline)
}

// isObject reports whether raw JSON is an object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
