package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// page is the inspector open in a test's browser.
type page struct {
	t     *testing.T
	b     *browser
	shots string
}

// openUI starts a browser, opens base/ui/ and signs in through form#auth
// with adminToken (no user token: the suites' ingress is insecure-dev).
func openUI(t *testing.T, base, adminToken string) *page {
	t.Helper()
	p := &page{t: t, b: newBrowser(t), shots: shotsDir(t)}
	p.do("open "+base+"/ui/", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("form#auth")))
	p.set("form#auth input#admin-token", adminToken)
	p.click("form#auth button[type=submit]")
	p.until("the admin token saved to sessionStorage baton.adminToken",
		`(tok) => sessionStorage.getItem("baton.adminToken") === tok`, adminToken)
	return p
}

// do runs actions, each wait bounded by wait; on an error it reports what
// the page shows and fails the test.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.fail(what, err)
	}
}

// fail saves a screenshot of the page as it is, logs its error box and
// its view's HTML, and fails the test.
func (p *page) fail(what string, err error) {
	p.t.Helper()
	if p.b.ctx.Err() == nil {
		p.shot("FAILED-" + safeName(p.t.Name()))
		p.t.Logf("page when it failed:\n%s", p.eval(`(() => {
			const e = document.querySelector("#error");
			const err = e && !e.hidden ? "#error: " + e.textContent.trim() + "\n" : "";
			const view = document.querySelector("main#view") || document.body;
			return location.href + "\n" + err + view.outerHTML.slice(0, 6000);
		})()`))
	}
	p.t.Fatalf("%s: %v", what, err)
}

// eval is the string value of a JavaScript expression (the error, in
// parentheses, if it fails).
func (p *page) eval(expr string) string {
	ctx, cancel := context.WithTimeout(p.b.ctx, wait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return s
}

// until waits until the JavaScript function fn, called with args,
// returns a truthy value; what names the condition. The arguments are
// written into the call as JSON: chromedp passes an empty string, array
// or object as undefined (CallArgument.Value is omitempty under jsonv2).
func (p *page) until(what, fn string, args ...any) {
	p.t.Helper()
	call := p.call(fn, args)
	ctx, cancel := context.WithTimeout(p.b.ctx, wait)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.PollFunction[chromedp.Void]("() => "+call,
		chromedp.WithPollingTimeout(wait), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		p.fail("waiting for "+what, err)
	}
}

// js calls the JavaScript function fn with args once.
func (p *page) js(what, fn string, args ...any) {
	p.t.Helper()
	p.do(what, chromedp.Evaluate[chromedp.Void](p.call(fn, args)))
}

// call is the expression that calls fn with args, JSON-encoded.
func (p *page) call(fn string, args []any) string {
	p.t.Helper()
	if args == nil {
		args = []any{}
	}
	enc, err := json.Marshal(args)
	if err != nil {
		p.t.Fatal(err)
	}
	return fmt.Sprintf("(%s)(...%s)", fn, enc)
}

// visible waits until an element of sel is visible.
func (p *page) visible(sel string) {
	p.t.Helper()
	p.do("waiting for "+sel+" to be visible", chromedp.WaitVisible(chromedp.CSS(sel)))
}

// gone waits until no element matches sel.
func (p *page) gone(sel string) {
	p.t.Helper()
	p.do("waiting for "+sel+" to be gone", chromedp.WaitNotPresent(chromedp.CSS(sel)))
}

// attr is attribute name of the first element of sel (waiting for one).
func (p *page) attr(sel, name string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, wait)
	defer cancel()
	r, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil {
		p.fail("reading "+name+" of "+sel, err)
	}
	return r.Value
}

// hasText waits until a visible element of sel has text containing each
// of subs.
func (p *page) hasText(sel string, subs ...string) {
	p.t.Helper()
	p.until(fmt.Sprintf("%s with text %q", sel, subs), `(sel, subs) =>
		[...document.querySelectorAll(sel)].some(e =>
			e.getClientRects().length > 0 && subs.every(s => e.textContent.includes(s)))`, sel, subs)
}

// textIs waits until the first element of sel has exactly text want
// (trimmed).
func (p *page) textIs(sel, want string) {
	p.t.Helper()
	p.until(fmt.Sprintf("%s to read %q", sel, want), `(sel, want) => {
		const e = document.querySelector(sel);
		return e !== null && e.textContent.trim() === want;
	}`, sel, want)
}

// route navigates the app by hash (#/, #/session/<id>, #/deployments).
func (p *page) route(hash string) {
	p.t.Helper()
	p.js("go to "+hash, `(hash) => { location.hash = hash; }`, hash)
}

// click clicks the first element of sel once it is visible.
func (p *page) click(sel string) {
	p.t.Helper()
	p.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// set sets the value of the form field sel (an input, a textarea or a
// select) as a user would change it: the value, then its input and
// change events. (chromedp.SetValue cannot set "": it passes an empty
// string as undefined.)
func (p *page) set(sel, value string) {
	p.t.Helper()
	p.do("waiting for "+sel, chromedp.WaitReady(chromedp.CSS(sel)))
	p.js("set "+sel, `(sel, value) => {
		const e = document.querySelector(sel);
		e.focus();
		e.value = value;
		if (e.value !== value) throw new Error(sel + " refused the value " + JSON.stringify(value));
		e.dispatchEvent(new Event("input", {bubbles: true}));
		e.dispatchEvent(new Event("change", {bubbles: true}));
	}`, sel, value)
}

// shot saves a full-page PNG of the page as name.png.
func (p *page) shot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.b.ctx, wait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot %s", path)
}

// shotsDir is $BATON_UI_SHOTS, or build/ui-shots under the module root
// (found from the working directory, test/ui), created.
func shotsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BATON_UI_SHOTS")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "build", "ui-shots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "-") }
