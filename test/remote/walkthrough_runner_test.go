package remote_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runner plays the walkthrough's nats commands: n is the command as
// parsed, the other arguments what it means.
type runner interface {
	pub(n natsCmd, subject string, body []byte)
	req(n natsCmd, subject string, body []byte) []byte
	// reply answers every request on subject in queue with body until
	// the returned func stops it.
	reply(n natsCmd, subject, queue string, body []byte) (stop func())
	// sub shows the messages on subjects (in queue, if not empty).
	sub(n natsCmd, subjects []string, queue string) *watch
	// read shows the first count messages of subject in stream.
	read(n natsCmd, stream, subject string, count int) []msg
}

// msg is a message a nats sub showed.
type msg struct {
	subject string
	data    []byte
}

// watch is what a nats sub shows, as it comes.
type watch struct {
	mu   sync.Mutex
	msgs []msg
	done bool // nothing more will come
	stop func()
}

func (w *watch) add(subject string, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg{subject, bytes.Clone(data)})
}

func (w *watch) snapshot() []msg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]msg(nil), w.msgs...)
}

const cliTimeout = 30 * time.Second

// goRunner plays the commands with nats.go, on a connection of its own.
type goRunner struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newGoRunner(t *testing.T, e *env) runner {
	nc, js := e.h.Connect(e.URL)
	return goRunner{t: t, nc: nc, js: js}
}

func (g goRunner) check(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g goRunner) pub(_ natsCmd, subject string, body []byte) {
	g.check(g.nc.Publish(subject, body))
	g.check(g.nc.Flush())
}

func (g goRunner) req(_ natsCmd, subject string, body []byte) []byte {
	m, err := g.nc.Request(subject, body, cliTimeout)
	g.check(err)
	return m.Data
}

func (g goRunner) reply(_ natsCmd, subject, queue string, body []byte) func() {
	sub, err := g.nc.QueueSubscribe(subject, queue, func(m *nats.Msg) { _ = m.Respond(body) })
	g.check(err)
	g.check(g.nc.Flush())
	return func() { _ = sub.Unsubscribe(); _ = g.nc.Flush() }
}

func (g goRunner) sub(_ natsCmd, subjects []string, queue string) *watch {
	w := &watch{}
	var subs []*nats.Subscription
	for _, s := range subjects {
		sub, err := g.nc.QueueSubscribe(s, queue, func(m *nats.Msg) { w.add(m.Subject, m.Data) })
		g.check(err)
		subs = append(subs, sub)
	}
	g.check(g.nc.Flush())
	w.stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		_ = g.nc.Flush()
	}
	return w
}

func (g goRunner) read(_ natsCmd, stream, subject string, count int) []msg {
	ctx, cancel := context.WithTimeout(g.t.Context(), wait)
	defer cancel()
	cons, err := g.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	g.check(err)
	var out []msg
	for len(out) < count {
		m, err := cons.Next(jetstream.FetchMaxWait(wait))
		g.check(err)
		out = append(out, msg{m.Subject(), m.Data()})
	}
	return out
}

// cliRunner plays the commands with the nats CLI: the documented command
// line with --server (the test's) and --no-context (none of the user's).
type cliRunner struct {
	t   *testing.T
	e   *env
	bin string
}

func newCLIRunner(t *testing.T, e *env) runner {
	bin := natsCLI(t)
	t.Logf("the nats CLI %s: %s", cliVersion, bin)
	return cliRunner{t: t, e: e, bin: bin}
}

func (c cliRunner) command(ctx context.Context, n natsCmd) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, append(n.argv[1:], "--server", c.e.URL, "--no-context")...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// output runs n to its end and returns its standard output.
func (c cliRunner) output(n natsCmd) []byte {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), wait)
	defer cancel()
	var stderr bytes.Buffer
	cmd := c.command(ctx, n)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s: %v\n%s%s", strings.Join(n.argv, " "), err, out, stderr.Bytes())
	}
	return out
}

func (c cliRunner) pub(n natsCmd, _ string, _ []byte) { c.output(n) }

func (c cliRunner) req(n natsCmd, _ string, _ []byte) []byte { return bytes.TrimSpace(c.output(n)) }

func (c cliRunner) read(n natsCmd, _, subject string, _ int) []msg {
	var out []msg
	for _, l := range strings.Split(string(c.output(n)), "\n") {
		if strings.HasPrefix(l, "{") {
			out = append(out, msg{subject, []byte(l)})
		}
	}
	return out
}

func (c cliRunner) reply(n natsCmd, _, _ string, _ []byte) func() {
	p := c.start(n, nil)
	p.waitFor(c.t, "Listening on")
	return p.stop
}

func (c cliRunner) sub(n natsCmd, subjects []string, queue string) *watch {
	w := &watch{}
	p := c.start(n, w)
	w.stop = p.stop
	p.waitFor(c.t, "Subscribing on")
	if queue == "" {
		c.probe(p, subjects) // "Subscribing on" comes before the subscription
	}
	return w
}

// probe publishes a probe on a live subject of subjects until p shows it.
func (c cliRunner) probe(p *cliProc, subjects []string) {
	c.t.Helper()
	i := 0
	for i < len(subjects) && !strings.HasPrefix(subjects[i], "baton.live.") {
		i++
	}
	if i == len(subjects) {
		c.t.Fatalf("%v: a watcher of no live subject, which the test cannot probe", subjects)
	}
	c.e.h.Eventually(wait, "the nats CLI subscribed", func() bool {
		_ = c.e.NC.Publish(subjects[i], []byte(probe))
		_ = c.e.NC.Flush()
		time.Sleep(20 * time.Millisecond)
		return p.shows(probe)
	})
}

// cliProc is a nats CLI process that runs until stopped: its output, and
// the messages it shows to w.
type cliProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  []string
}

// received is the CLI's line before a message it shows.
var received = regexp.MustCompile(`Received on (?:subject )?"([^"]+)"`)

func (c cliRunner) start(n natsCmd, w *watch) *cliProc {
	c.t.Helper()
	r, wr, err := os.Pipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &cliProc{cmd: c.command(context.Background(), n), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = wr, wr
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("%s: %v", strings.Join(n.argv, " "), err)
	}
	_ = wr.Close()
	go p.read(r, w)
	c.t.Cleanup(func() {
		p.stop()
		if c.t.Failed() {
			c.t.Logf("%s:\n%s", strings.Join(n.argv, " "), strings.Join(p.lines(), "\n"))
		}
	})
	return p
}

func (p *cliProc) read(r *os.File, w *watch) {
	defer close(p.done)
	defer r.Close()
	subject := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		l := sc.Text()
		p.mu.Lock()
		p.out = append(p.out, l)
		p.mu.Unlock()
		if m := received.FindStringSubmatch(l); m != nil {
			subject = m[1]
		} else if w != nil && subject != "" && strings.HasPrefix(l, "{") {
			w.add(subject, []byte(l))
			subject = ""
		}
	}
	_ = p.cmd.Wait()
}

func (p *cliProc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.out...)
}

func (p *cliProc) shows(s string) bool {
	for _, l := range p.lines() {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func (p *cliProc) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(cliTimeout)
	for !p.shows(s) {
		select {
		case <-p.done:
			t.Fatalf("the nats CLI ended before %q:\n%s", s, strings.Join(p.lines(), "\n"))
		case <-deadline:
			t.Fatalf("the nats CLI did not show %q in %v:\n%s", s, cliTimeout, strings.Join(p.lines(), "\n"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop is the docs' Ctrl-C: an interrupt, then a kill if it lingers.
func (p *cliProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// natsCLI is the nats CLI the docs name: on the PATH or in GOPATH/bin if
// it is that version, else installed into the user's cache with go
// install (GOFLAGS cleared: the module's flags are not the CLI's).
func natsCLI(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	gobin := filepath.Join(cache, "baton-test", "natscli-"+cliVersion)
	candidates := []string{filepath.Join(gobin, "nats")}
	if p, err := exec.LookPath("nats"); err == nil {
		candidates = append(candidates, p)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), "bin", "nats"))
	}
	for _, p := range candidates {
		if out, err := exec.Command(p, "--version").CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == cliVersion {
			return p
		}
	}
	t.Logf("no nats CLI %s among %q: go install github.com/nats-io/natscli/nats@%s into %s", cliVersion, candidates, cliVersion, gobin)
	cmd := exec.Command("go", "install", "github.com/nats-io/natscli/nats@"+cliVersion)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the walkthrough under make soak runs the nats CLI %s, and go install failed: %v\n%s", cliVersion, err, out)
	}
	return filepath.Join(gobin, "nats")
}
