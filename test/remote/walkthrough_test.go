package remote_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// The walkthrough of docs/agent.md ("A worker by hand, with the nats
// CLI"), replayed. Its marked code blocks are the convention:
//
//   - a block whose info string is `sh walkthrough:<name>` holds commands,
//     one a line, run in document order byte for byte (quoting and $NAME
//     expansion as a shell does them; anything else a shell would read
//     specially is refused, so nothing in a block goes untested). A line
//     `#   {…}` under a `nats req` is the answer the docs show; other `#`
//     lines are comments.
//   - a block whose info string is `text walkthrough:<name>` holds what the
//     last `nats sub` before it (other than the worker's) shows: one
//     `<kind> [<data>]` a line, in order within each subject.
//
// In a shown answer or event data, `…` with the letters and digits before
// it stands for any text within one JSON string or number (`01M8…` is any
// session ID). The commands a block may hold are the walkthrough's:
// bin/owner (a process of the test, on the test's server), nats pub, req,
// reply and sub, and NAME=… for SID and TOKEN, which the test takes from
// what it saw (the start's answer, the step request). A nats reply or nats
// sub on the step subject is terminal 3's worker and replaces the one
// before it (the docs' Ctrl-C).
//
// The nats commands are played by nats.go as the CLI plays them; under
// make soak (BATON_SOAK=1) also by the nats CLI v0.5.0 itself, the exact
// command lines with --server (installed with go install when missing).

// walkthroughNames are the marked blocks, in document order.
var walkthroughNames = []string{"owner", "worker", "session", "session-events", "by-hand-worker", "watch",
	"by-hand-deliver", "by-hand-start", "by-hand-journal", "by-hand-reply", "by-hand-events"}

const (
	agentDoc = "../../docs/agent.md"
	marker   = "walkthrough:"
	// cliVersion is the nats CLI the docs name.
	cliVersion = "v0.5.0"
)

// mode is a way to play the walkthrough's nats commands.
type mode struct {
	name   string
	runner func(*testing.T, *env) runner
}

func TestWalkthrough(t *testing.T) {
	blocks := loadWalkthrough(t)
	modes := []mode{{"nats.go", newGoRunner}}
	if testsize.Soak() { // the full size: the CLI itself too
		modes = append(modes, mode{"nats CLI", newCLIRunner})
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t)
			w := &walk{t: t, e: e, r: m.runner(t, e), names: subjects.Default(), vars: map[string]string{}, known: map[string]string{}}
			w.play(blocks)
		})
	}
}

// The subjects table and the schemas of docs/agent.md name what package
// subjects builds and what wire/testdata/agent holds.
func TestAgentDocSubjectsAndSchemas(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	_, section, ok := strings.Cut(doc, "\n### Subjects\n")
	section, _, ok2 := strings.Cut(section, "\n### ")
	if !ok || !ok2 {
		t.Fatal(`docs/agent.md has no "### Subjects" section`)
	}
	var got []string
	for _, l := range strings.Split(section, "\n") {
		if f := strings.Split(l, "|"); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(f[1]), "`") {
			got = append(got, strings.Trim(strings.TrimSpace(f[1]), "`"))
		}
	}
	n, d, k := subjects.Default(), "<dep>", "<token>"
	want := []string{n.AgentStep(d), n.AgentReply(d, k), n.AgentHeartbeat(d, k), n.AgentDelta(d, k),
		n.AgentJournal(d, k), n.AgentHistory(d), n.AgentCancel(d, k), n.AgentWorkerInbox(d) + ".>"}
	if !slices.Equal(got, want) {
		t.Errorf("the subjects table lists\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(section, "`"+n.AgentQueueGroup(d)+"`") {
		t.Errorf("the subjects table does not name the queue group %s", n.AgentQueueGroup(d))
	}
	for _, name := range wire.AgentSchemaNames() {
		path := fmt.Sprintf("wire/testdata/agent/%s.v%d.json", name, wire.AgentProtocolVersion)
		if _, err := os.Stat(filepath.Join("..", "..", path)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/agent.md does not name the shape %s", name)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(agentDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// block is one marked code block.
type block struct {
	name, lang string
	line       int      // of its first content line, in docs/agent.md
	lines      []string // its content
}

func (b block) at(i int) string { return fmt.Sprintf("docs/agent.md:%d (%s)", b.line+i, b.name) }

// loadWalkthrough reads the marked blocks and checks their names.
func loadWalkthrough(t *testing.T) []block {
	t.Helper()
	blocks, err := markedBlocks(readDoc(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range blocks {
		names = append(names, b.name)
	}
	if !slices.Equal(names, walkthroughNames) {
		t.Fatalf("docs/agent.md's walkthrough blocks are %q, want %q (the test replays them; update walkthroughNames with the docs)", names, walkthroughNames)
	}
	return blocks
}

// markedBlocks are the fenced blocks of doc whose info string is
// `<lang> walkthrough:<name>`.
func markedBlocks(doc string) ([]block, error) {
	var out []block
	var cur *block
	fenced := false
	for i, l := range strings.Split(doc, "\n") {
		switch {
		case fenced && strings.TrimSpace(l) == "```":
			if cur != nil {
				out = append(out, *cur)
			}
			fenced, cur = false, nil
		case fenced:
			if cur != nil {
				cur.lines = append(cur.lines, l)
			}
		case strings.HasPrefix(l, "```"):
			fenced = true
			info := strings.Fields(strings.TrimPrefix(l, "```"))
			if !strings.Contains(l, marker) {
				continue
			}
			if len(info) != 2 || !strings.HasPrefix(info[1], marker) || (info[0] != "sh" && info[0] != "text") {
				return nil, fmt.Errorf("docs/agent.md:%d: a marked block opens with ```sh walkthrough:<name> or ```text walkthrough:<name>, not %q", i+1, l)
			}
			cur = &block{lang: info[0], name: strings.TrimPrefix(info[1], marker), line: i + 2}
		}
	}
	if fenced {
		return nil, fmt.Errorf("docs/agent.md: a code block is not closed")
	}
	return out, nil
}

// command is one command line of an sh block.
type command struct {
	line   string
	at     string
	answer string // the answer shown under it ("" when none)
}

func commands(b block) []command {
	var out []command
	for i, l := range b.lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
		case strings.HasPrefix(trimmed, "#"):
			shown := strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
			if len(out) > 0 && out[len(out)-1].answer == "" && strings.HasPrefix(shown, "{") {
				out[len(out)-1].answer = shown
			}
		default:
			out = append(out, command{line: trimmed, at: b.at(i)})
		}
	}
	return out
}

// assignment is NAME of a line NAME=…, the reader's copy of a value.
var assignment = regexp.MustCompile(`^([A-Z_]+)=\S*(\s+#.*)?$`)

// shown is a pattern of what the docs show: `…` with the letters and
// digits before it matches any text within one JSON string or number.
func shown(s string) *regexp.Regexp {
	parts := regexp.MustCompile(`[0-9A-Za-z]*…`).Split(s, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `[^"]*`) + `$`)
}

// expectation is one line of a text block: a message's kind and, when
// shown, its data.
type expectation struct {
	kind string
	data *regexp.Regexp
	text string
}

func expectations(b block) []expectation {
	var out []expectation
	for _, l := range b.lines {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		kind, data, _ := strings.Cut(l, " ")
		x := expectation{kind: kind, text: l}
		if data = strings.TrimSpace(data); data != "" {
			x.data = shown(data)
		}
		out = append(out, x)
	}
	return out
}

// isLive reports the kinds that travel on baton.live.<id>, not the event
// stream.
func isLive(kind string) bool {
	return kind == wire.EventMessageDelta || kind == wire.EventMessageDiscarded || kind == wire.EventTaskProgress
}

// match compares what a nats sub showed with a text block, within each
// subject (events, live): "" when they agree.
func match(msgs []msg, want []expectation) string {
	var evs, live []msg
	for _, m := range msgs {
		switch {
		case strings.HasPrefix(m.subject, "baton.live."):
			if !isProbe(m) {
				live = append(live, m)
			}
		default:
			evs = append(evs, m)
		}
	}
	var wantEvs, wantLive []expectation
	for _, x := range want {
		if isLive(x.kind) {
			wantLive = append(wantLive, x)
		} else {
			wantEvs = append(wantEvs, x)
		}
	}
	return matchSeq("events", evs, wantEvs) + matchSeq("live", live, wantLive)
}

func matchSeq(what string, msgs []msg, want []expectation) string {
	var got []string
	bad := len(msgs) != len(want)
	for i, m := range msgs {
		var env struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.data, &env); err != nil {
			return fmt.Sprintf("%s: %q is not an event: %v\n", what, m.data, err)
		}
		got = append(got, env.Kind+" "+string(env.Data))
		if i < len(want) && (env.Kind != want[i].kind || want[i].data != nil && !want[i].data.Match(env.Data)) {
			bad = true
		}
	}
	if !bad {
		return ""
	}
	var w []string
	for _, x := range want {
		w = append(w, x.text)
	}
	return fmt.Sprintf("%s shown:\n  %s\nthe docs say:\n  %s\n", what, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
}

// The walkthrough's probe: a message the test publishes on a watched live
// subject until a CLI subscriber shows it, so the subscription is known to
// be in place; no Baton process reads it.
const probe = "walkthrough probe"

func isProbe(m msg) bool { return string(m.data) == probe }

// The walkthrough's commands split into words as a shell splits them.
func TestWalkthroughShellWords(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"SID": "01M8X", "TOKEN": "tk"}
	for _, c := range []struct {
		line string
		want []string
		err  string
	}{
		{`nats pub "baton.inbox.$SID" '{"v":1}'`, []string{"nats", "pub", "baton.inbox.01M8X", `{"v":1}`}, ""},
		{`nats pub "a.$TOKEN" ''`, []string{"nats", "pub", "a.tk", ""}, ""},
		{`nats req h '{"token":"'"$TOKEN"'"}'`, []string{"nats", "req", "h", `{"token":"tk"}`}, ""},
		{`a ${SID}x "q\"\$" # a comment`, []string{"a", "01M8Xx", `q"$`}, ""},
		{`a $NOPE`, nil, "$NOPE is not set"},
		{`a | b`, nil, "reads it specially"},
		{`a 'open`, nil, "unclosed '"},
		{`a "$(date)"`, nil, "not set"},
	} {
		got, err := shellWords(c.line, vars)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one with %q", c.line, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%s: %q, %v; want %q", c.line, got, err, c.want)
		}
	}
}
