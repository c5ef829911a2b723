package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// body returns n lines of statements.
func body(n int) string { return strings.Repeat("\t_ = 0\n", n) }

// fn returns a function declaration of exactly n lines.
func fn(sig string, n int) string { return "func " + sig + " {\n" + body(n-2) + "}\n" }

// write creates root/rel with src, making its directories.
func write(t *testing.T, root, rel, src string) {
	t.Helper()
	path := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree is a synthetic module: something over each limit, something exactly
// at it, and oversized files where the check must not look.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	long := "package a\n\n" + fn("short()", 10) + strings.Repeat("// filler\n", 600-2-10)
	write(t, root, "a/at_limit.go", long) // 600 lines: allowed
	write(t, root, "a/over_limit.go", long+"// one more\n")
	write(t, root, "b/funcs.go", "package b\n\n"+
		fn("atLimit()", 80)+"\n"+ // line 3
		fn("tooLong()", 81)+"\n"+ // line 84
		"type T[P any] struct{}\n\n"+ // line 166
		fn("(t *T[P]) Method()", 82)+"\n"+ // line 168
		"var handler = func() {\n"+body(79)+"}\n\n"+ // line 251, 81 lines
		"var table = map[string]func(){\n\t\"x\": func() {\n"+body(90)+"\t},\n}\n") // literal at 334, 92 lines
	tooBig := "package c\n\n" + fn("huge()", 700)
	write(t, root, "c/big_test.go", tooBig)
	write(t, root, "c/testdata/big.go", tooBig)
	write(t, root, "c/.hidden/big.go", tooBig)
	write(t, root, "c/_skip/big.go", tooBig)
	write(t, root, "vendor/v/big.go", tooBig)
	return root
}

var lim = Limits{File: 600, Func: 80}

func TestCheckFindsOffenders(t *testing.T) {
	res, err := Check(tree(t), lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range res.Offenders {
		got = append(got, o.String())
	}
	want := []string{
		"a/over_limit.go:1 file 601 lines",
		"b/funcs.go:84 tooLong 81 lines",
		"b/funcs.go:168 T.Method 82 lines",
		"b/funcs.go:251 handler 81 lines",
		"b/funcs.go:334 table 92 lines",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("offenders:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(res.Stale) != 0 || !res.Failed() {
		t.Fatalf("stale %v, failed %v", res.Stale, res.Failed())
	}
}

func TestAllowList(t *testing.T) {
	allowed := []allow{
		{Path: "a/over_limit.go", Reason: "a table"},
		{Path: "b/funcs.go", Func: "tooLong", Reason: "a table"},
		{Path: "b/funcs.go", Func: "T.Method", Reason: "a table"},
		{Path: "b/funcs.go", Func: "handler", Reason: "a table"},
		{Path: "b/funcs.go", Func: "table", Reason: "a table"},
	}
	res, err := Check(tree(t), lim, allowed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("everything allowed, got %+v", res)
	}
	// A file entry does not allow the file's functions, a function entry
	// not its file, and an entry that allows nothing is stale.
	allowed = []allow{
		{Path: "b/funcs.go", Reason: "not the functions"},
		{Path: "a/over_limit.go", Func: "short", Reason: "not the file"},
	}
	res, err = Check(tree(t), lim, allowed)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Offenders) != 5 || len(res.Stale) != 2 {
		t.Fatalf("want 5 offenders and 2 stale entries, got %+v", res)
	}
}

func TestRun(t *testing.T) {
	root := tree(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"-root", root}, nil, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "b/funcs.go:84 tooLong 81 lines\n") ||
		!strings.Contains(out.String(), "sizes: 5 over the limits") {
		t.Fatalf("output:\n%s", out.String())
	}

	out.Reset()
	stale := []allow{{Path: "gone.go", Reason: "split since"}}
	args := []string{"-root", root, "-max-file", "1000", "-max-func", "100"}
	if code := run(args, stale, &out, &errOut); code != 1 || !strings.Contains(out.String(), "gone.go file: allowed") {
		t.Fatalf("stale entry: exit %d, output:\n%s", code, out.String())
	}

	out.Reset()
	if code := run(args, nil, &out, &errOut); code != 0 || out.Len() != 0 {
		t.Fatalf("within raised limits: exit %d, output:\n%s", code, out.String())
	}

	write(t, root, "d/broken.go", "package d\nfunc {")
	if code := run(args, nil, &out, &errOut); code != 2 {
		t.Fatalf("unparsable file: exit %d, want 2", code)
	}
}

// TestAllowListEntries: every entry of the real list names a file and gives
// a reason, once.
func TestAllowListEntries(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range allowList {
		key := fmt.Sprintf("%s %s", a.Path, a.Func)
		if a.Path == "" || strings.TrimSpace(a.Reason) == "" || seen[key] {
			t.Errorf("entry %+v: needs a path, a reason, and to be the only one", a)
		}
		if strings.Contains(a.Path, `\`) || strings.HasPrefix(a.Path, "/") || strings.HasPrefix(a.Path, "./") {
			t.Errorf("entry %+v: path must be slash-separated and relative to the module root", a)
		}
		seen[key] = true
	}
}
