package remote_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// walk plays the walkthrough's blocks, in order.
type walk struct {
	t     *testing.T
	e     *env
	r     runner
	names subjects.Names
	dep   string            // the owner's deployment
	vars  map[string]string // the reader's shell variables
	known map[string]string // what the test saw: SID from the start's answer

	worker func() // stops terminal 3's worker
	steps  *watch // the step requests terminal 3's nats sub shows
	shown  *watch // what the last other nats sub shows
}

func (w *walk) play(blocks []block) {
	for _, b := range blocks {
		switch b.lang {
		case "sh":
			for _, c := range commands(b) {
				w.run(c)
			}
		case "text":
			w.expect(b)
		}
	}
	if w.worker != nil {
		w.worker()
	}
}

func (w *walk) fatalf(c command, format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s: %s\n  %s", c.at, fmt.Sprintf(format, args...), c.line)
}

func (w *walk) run(c command) {
	w.t.Helper()
	if m := assignment.FindStringSubmatch(c.line); m != nil {
		w.assign(c, m[1])
		return
	}
	args, err := shellWords(c.line, w.vars)
	if err != nil {
		w.fatalf(c, "%v", err)
	}
	switch args[0] {
	case "bin/owner":
		w.owner(c, args)
	case "nats":
		w.nats(c, args)
	default:
		w.fatalf(c, "the test does not know the command %q", args[0])
	}
}

// assign sets the reader's variable name to what the test saw.
func (w *walk) assign(c command, name string) {
	w.t.Helper()
	switch name {
	case "SID":
		sid, ok := w.known["SID"]
		if !ok {
			w.fatalf(c, "SID before a start request answered with a sessionId")
		}
		w.vars[name] = sid
	case "TOKEN":
		if w.steps == nil {
			w.fatalf(c, "TOKEN before a nats sub on the step subject")
		}
		w.vars[name] = w.token(c)
	default:
		w.fatalf(c, "the test does not know the variable %s", name)
	}
}

// token is the token of the first step request the worker's nats sub
// showed; the request is checked against its frozen schema.
func (w *walk) token(c command) string {
	w.t.Helper()
	var req wire.AgentStepRequest
	w.e.h.Eventually(wait, "a step request on the worker's nats sub", func() bool { return len(w.steps.snapshot()) > 0 })
	m := w.steps.snapshot()[0]
	if err := wire.DecodeAgent("step_request", m.data, &req); err != nil {
		w.fatalf(c, "the step request: %v", err)
	}
	return req.Token
}

// owner starts the documented owner against the test's server: its
// flags but --nats-url and --lock-file (the harness's instead).
func (w *walk) owner(c command, args []string) {
	w.t.Helper()
	var extra []string
	for i := 1; i < len(args); i += 2 {
		if i+1 >= len(args) || !strings.HasPrefix(args[i], "--") {
			w.fatalf(c, "want --flag value pairs")
		}
		switch args[i] {
		case "--deployment-id":
			w.dep = args[i+1]
		case "--nats-url", "--lock-file":
		default:
			extra = append(extra, args[i], args[i+1])
		}
	}
	if w.dep == "" || !slices.Contains(extra, "nats") {
		w.fatalf(c, "want --deployment-id and --agent nats")
	}
	flags := harness.OwnerFlags(w.e.URL, w.dep, w.dep+"-a", w.e.logs, leaseTTL, extra...)
	w.e.h.OwnerProc(w.e.procs, "owner "+w.dep, w.e.bin, flags, wait)
}

// natsCmd is a parsed nats command line.
type natsCmd struct {
	argv  []string
	verb  string
	pos   []string
	flags map[string]string
}

// natsFlags are the CLI flags the walkthrough may use: true takes a value.
var natsFlags = map[string]bool{"queue": true, "count": true, "stream": true, "all": false, "raw": false}

func parseNats(args []string) (natsCmd, error) {
	n := natsCmd{argv: args, flags: map[string]string{}}
	if len(args) < 2 {
		return n, errors.New("nats without a command")
	}
	n.verb = args[1]
	for i := 2; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			n.pos = append(n.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		takes, ok := natsFlags[name]
		switch {
		case !ok:
			return n, fmt.Errorf("the test does not know the flag --%s", name)
		case takes && !hasVal:
			if i++; i >= len(args) {
				return n, fmt.Errorf("--%s without a value", name)
			}
			val = args[i]
		}
		n.flags[name] = val
	}
	return n, nil
}

func (w *walk) nats(c command, args []string) {
	w.t.Helper()
	n, err := parseNats(args)
	if err != nil {
		w.fatalf(c, "%v", err)
	}
	want := map[string]int{"pub": 2, "req": 2, "reply": 2}[n.verb]
	if want > 0 && len(n.pos) != want {
		w.fatalf(c, "nats %s wants a subject and a body", n.verb)
	}
	switch n.verb {
	case "pub":
		w.checkBody(c, n.pos[0], n.pos[1])
		w.r.pub(n, n.pos[0], []byte(n.pos[1]))
	case "req":
		w.req(c, n)
	case "reply":
		w.reply(c, n)
	case "sub":
		w.sub(c, n)
	default:
		w.fatalf(c, "the test does not know nats %s", n.verb)
	}
}

func (w *walk) req(c command, n natsCmd) {
	w.t.Helper()
	w.checkBody(c, n.pos[0], n.pos[1])
	ans := w.r.req(n, n.pos[0], []byte(n.pos[1]))
	if c.answer != "" && !shown(c.answer).Match(ans) {
		w.fatalf(c, "answered\n  %s\nthe docs show\n  %s", ans, c.answer)
	}
	if strings.HasPrefix(n.pos[0], w.names.AgentJournal(w.dep, "")) && strings.Contains(string(ans), `"failure"`) {
		w.fatalf(c, "the journal refused: %s", ans)
	}
	if n.pos[0] == w.names.Start(w.dep) {
		var r struct{ SessionID string }
		if err := json.Unmarshal(ans, &r); err != nil || r.SessionID == "" {
			w.fatalf(c, "no sessionId in the answer %s", ans)
		}
		w.known["SID"] = r.SessionID
	}
}

// reply starts terminal 3's worker: it answers every step with the body.
func (w *walk) reply(c command, n natsCmd) {
	w.t.Helper()
	w.checkWorker(c, n)
	w.checkBody(c, n.pos[0], n.pos[1])
	w.replaceWorker(w.r.reply(n, n.pos[0], n.flags["queue"], []byte(n.pos[1])))
}

func (w *walk) sub(c command, n natsCmd) {
	w.t.Helper()
	switch {
	case n.flags["stream"] != "":
		count := 0
		if _, err := fmt.Sscan(n.flags["count"], &count); err != nil || count < 1 || len(n.pos) != 1 {
			w.fatalf(c, "nats sub --stream wants one subject and --count")
		}
		if _, all := n.flags["all"]; !all {
			w.fatalf(c, "nats sub --stream without --all shows no earlier event")
		}
		w.shown = &watch{msgs: w.r.read(n, n.flags["stream"], n.pos[0], count), done: true}
	case len(n.pos) == 1 && n.pos[0] == w.names.AgentStep(w.dep):
		w.checkWorker(c, n)
		steps := w.r.sub(n, n.pos, n.flags["queue"])
		w.replaceWorker(steps.stop)
		w.steps = steps
	default:
		w.shown = w.r.sub(n, n.pos, n.flags["queue"])
	}
}

func (w *walk) replaceWorker(stop func()) {
	if w.worker != nil {
		w.worker() // the docs' Ctrl-C
	}
	w.worker, w.steps = stop, nil
}

// checkWorker: a worker subscribes to the step subject in the queue group.
func (w *walk) checkWorker(c command, n natsCmd) {
	w.t.Helper()
	if n.pos[0] != w.names.AgentStep(w.dep) || n.flags["queue"] != w.names.AgentQueueGroup(w.dep) {
		w.fatalf(c, "a worker subscribes to %s in the queue group %s", w.names.AgentStep(w.dep), w.names.AgentQueueGroup(w.dep))
	}
}

// checkBody refuses a body the CLI would not send as it stands (it
// expands {{…}} as a template), and checks a protocol body against its
// frozen schema, so a wrong one fails here with the schema's words.
func (w *walk) checkBody(c command, subject, body string) {
	w.t.Helper()
	if strings.Contains(body, "{{") {
		w.fatalf(c, "the nats CLI would expand {{ in the body as a template")
	}
	if subject == w.names.Inbox(w.known["SID"]) {
		if _, err := wire.Decode([]byte(body)); err != nil {
			w.fatalf(c, "the inbox command: %v", err)
		}
		return
	}
	shape := w.shape(subject)
	if shape == "" || body == "" && shape == "heartbeat" {
		return
	}
	if err := wire.DecodeAgent(shape, []byte(body), new(map[string]any)); err != nil {
		w.fatalf(c, "%v", err)
	}
}

// shape is the protocol shape of a body the worker sends on subject (a
// nats reply's body answers the step subject).
func (w *walk) shape(subject string) string {
	n, d := w.names, w.dep
	switch {
	case subject == n.AgentStep(d), strings.HasPrefix(subject, n.AgentReply(d, "")):
		return "step_reply"
	case subject == n.AgentHistory(d):
		return "history_request"
	case strings.HasPrefix(subject, n.AgentDelta(d, "")):
		return "delta"
	case strings.HasPrefix(subject, n.AgentHeartbeat(d, "")):
		return "heartbeat"
	case strings.HasPrefix(subject, n.AgentJournal(d, "")):
		return "journal_request"
	}
	return ""
}

// expect checks what the last nats sub showed against a text block.
func (w *walk) expect(b block) {
	w.t.Helper()
	want := expectations(b)
	if w.shown == nil {
		w.t.Fatalf("%s: no nats sub before it shows anything", b.at(0))
	}
	diff := match(w.shown.snapshot(), want)
	for deadline := time.Now().Add(wait); diff != "" && !w.shown.done && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		diff = match(w.shown.snapshot(), want)
	}
	if diff != "" {
		w.t.Fatalf("%s:\n%s", b.at(0), diff)
	}
}

// shellWords splits line into words as a shell does, for what the
// walkthrough uses: blanks separate words, '…' is literal, "…" expands
// $NAME and ${NAME} (\" \\ \$ escaped), a bare $NAME expands, and # at
// the start of a word begins a comment. Anything else a shell reads
// specially is refused, and so is a variable not set.
func shellWords(line string, vars map[string]string) ([]string, error) {
	var out []string
	var w strings.Builder
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				out, in = append(out, w.String()), false
				w.Reset()
			}
		case c == '#' && !in:
			i = len(line)
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("an unclosed '")
			}
			w.WriteString(line[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '"':
			n, err := doubleQuoted(line[i+1:], vars, &w)
			if err != nil {
				return nil, err
			}
			i, in = i+n, true // at the closing quote
		case c == '$':
			n, err := expand(line[i+1:], vars, &w)
			if err != nil {
				return nil, err
			}
			i, in = i+n, true
		case strings.IndexByte("|&;<>()`\\*?[]{}~!", c) >= 0:
			return nil, fmt.Errorf("%q outside quotes: a shell reads it specially", c)
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	if len(out) == 0 {
		return nil, errors.New("no command")
	}
	return out, nil
}

// doubleQuoted writes the text of s up to its closing " and returns the
// bytes it read, the quote included.
func doubleQuoted(s string, vars map[string]string, w *strings.Builder) (int, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
			w.WriteByte(s[i+1])
			i++
		case c == '$':
			n, err := expand(s[i+1:], vars, w)
			if err != nil {
				return 0, err
			}
			i += n
		case c == '`':
			return 0, errors.New("` in double quotes: a shell runs it")
		default:
			w.WriteByte(c)
		}
	}
	return 0, errors.New(`an unclosed "`)
}

// expand writes the value of the variable s starts with (NAME or {NAME})
// and returns the bytes it read.
func expand(s string, vars map[string]string, w *strings.Builder) (int, error) {
	name, n := s, 0
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return 0, errors.New("an unclosed ${")
		}
		name, n = s[1:end], end+1
	} else {
		for n < len(s) && (s[n] == '_' || 'A' <= s[n] && s[n] <= 'Z' || 'a' <= s[n] && s[n] <= 'z' || n > 0 && '0' <= s[n] && s[n] <= '9') {
			n++
		}
		name = s[:n]
	}
	v, ok := vars[name]
	if name == "" || !ok {
		return 0, fmt.Errorf("$%s is not set here", name)
	}
	w.WriteString(v)
	return n, nil
}
