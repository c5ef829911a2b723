package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// wait bounds every wait on the page and every poll of the API: two make
// test runs may share two cores.
const wait = 60 * time.Second

// browsers are the names looked up on PATH when $BATON_CHROMIUM is unset.
var browsers = []string{"chromium", "chromium-headless-shell", "chromium-browser"}

// findBrowser is $BATON_CHROMIUM or the first of browsers on PATH. None is
// a failure (a skip only with -short): CI installs Debian's chromium.
func findBrowser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BATON_CHROMIUM"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("BATON_CHROMIUM=%s: %v", p, err)
		}
		return found
	}
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no Chromium found: none of %s on PATH and BATON_CHROMIUM unset; "+
		"install Debian's package (apt-get install chromium) or set BATON_CHROMIUM to a Chromium binary", strings.Join(browsers, ", "))
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
	return ""
}

// browser is one headless Chromium of a test: the tab's context, the
// process group the browser and all its children run in, its directory
// (a directory of the test's: the profile and $XDG_CONFIG_HOME, so that
// every process of the browser names it on its command line, the crash
// handlers it starts outside the group too), what the browser printed and
// what the page reported (uncaught exceptions, console errors, dialogs).
type browser struct {
	ctx  context.Context
	pgid int
	dir  string
	out  syncBuffer
	mu   sync.Mutex
	log  []string
	done chan struct{} // closed when the dialog handler has returned
}

// newBrowser starts a headless Chromium for t. Its lifetime is t's: the
// browser is the leader of a process group of its own (Setpgid), so every
// process it starts is in that group — but for its crash handlers, which
// start sessions of their own and are told apart by the browser's
// directory on their command line; the kernel kills the browser if the
// thread that started it dies with the test process (Pdeathsig; chromedp
// starts it from a goroutine locked to its thread until it exits), and
// its children and crash handlers follow it. When t ends the contexts are
// cancelled, the group and the crash handlers are SIGKILLed, and the test
// fails if any of them is left.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := findBrowser(t)
	b := &browser{dir: t.TempDir(), done: make(chan struct{})}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(filepath.Join(b.dir, "profile")),
		chromedp.Env("XDG_CONFIG_HOME="+b.dir, "XDG_CACHE_HOME="+b.dir),
		chromedp.CombinedOutput(&b.out),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		}),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b.ctx = ctx
	// The first Run starts the browser; its context must carry no timeout
	// (that would stop the browser), so the start is bounded by a timer.
	started := time.AfterFunc(wait, cancelAlloc)
	err := chromedp.Do(ctx)
	started.Stop()
	if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		b.pgid = c.Browser.Process().Pid
	}
	t.Cleanup(func() { b.stop(t, cancelTab, cancelAlloc) })
	if err != nil {
		close(b.done)
		t.Fatalf("start %s: %v\n%s", path, err, b.out.String())
	}
	b.listen(t)
	return b
}

// stop fails t if the page threw an uncaught exception (a broken view is
// what a blank page comes from), and ends the browser: it cancels the tab and the allocator (chromedp
// closes the browser and waits for it), SIGKILLs what is left of it
// whatever that did (at once if closing takes longer than 15 s), and fails
// t if a process of it is still alive after that. Its directory goes with
// t's temporary directories, after stop.
func (b *browser) stop(t *testing.T, cancelTab, cancelAlloc context.CancelFunc) {
	b.report(t)
	for _, n := range b.notes() {
		if strings.HasPrefix(n, uncaught) {
			t.Errorf("the inspector threw: %s", n)
		}
	}
	kill := time.AfterFunc(15*time.Second, func() { b.kill() })
	cancelTab()
	cancelAlloc() // waits for the process
	kill.Stop()
	<-b.done
	deadline := time.Now().Add(10 * time.Second)
	for left := b.kill(); len(left) > 0; left = b.kill() {
		if time.Now().After(deadline) {
			t.Errorf("browser processes still alive 10 s after SIGKILL: %v", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill SIGKILLs the browser's process group and its crash handlers and
// returns the processes of either that were alive.
func (b *browser) kill() []int {
	if b.pgid > 0 {
		_ = syscall.Kill(-b.pgid, syscall.SIGKILL)
	}
	left := b.processes()
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return left
}

// processes lists the live processes (zombies run nothing) of the
// browser's group, and those whose command line names its directory.
func (b *browser) processes() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if b.pgid > 0 && f[2] == strconv.Itoa(b.pgid) || bytes.Contains(cmdline, []byte(b.dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// listen records what the page reports (uncaught exceptions, console
// errors and warnings) and accepts every dialog (a confirm() of the
// inspector), logging it.
func (b *browser) listen(t *testing.T) {
	t.Helper()
	dialogs := make(chan string, 16)
	err := chromedp.Listen(b.ctx, func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			b.note("%s%s", uncaught, exceptionText(ev.ExceptionDetails))
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeWarning {
				b.note("console.%s: %s", ev.Type, consoleText(ev.Args))
			}
		case *cdppage.EventJavascriptDialogOpening:
			select {
			case dialogs <- string(ev.Type) + " " + ev.Message:
			default:
			}
		}
	})
	if err != nil {
		close(b.done)
		t.Fatalf("listen to the page: %v", err)
	}
	go func() {
		defer close(b.done)
		for {
			select {
			case <-b.ctx.Done():
				return
			case d := <-dialogs:
				b.note("dialog accepted: %s", d)
				_, _ = chromedp.Call(b.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
			}
		}
	}()
}

// uncaught begins the note of an uncaught exception.
const uncaught = "uncaught exception: "

func (b *browser) note(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, fmt.Sprintf(format, args...))
}

// notes is what the page reported so far.
func (b *browser) notes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

// report logs what the page reported and, if t failed, the end of the
// browser's output.
func (b *browser) report(t *testing.T) {
	for _, n := range b.notes() {
		t.Logf("page: %s", n)
	}
	if !t.Failed() {
		return
	}
	var lines []string
	for l := range strings.Lines(b.out.String()) {
		if !strings.Contains(l, "dbus") { // no system bus in a container: noise
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, "")
	if len(out) > 4000 {
		out = "…" + out[len(out)-4000:]
	}
	if out != "" {
		t.Logf("browser output:\n%s", out)
	}
}

func exceptionText(d *cdpruntime.ExceptionDetails) string {
	if d == nil {
		return "?"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

func consoleText(args []*cdpruntime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case a.Description != "":
			parts = append(parts, a.Description)
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// syncBuffer is a bytes.Buffer safe for the browser's output goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
