package runtime_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite regenerates the expected output of testdata/*.txt:
//
//	go test ./runtime -run TestScripts -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite expected output in testdata/*.txt")

// scriptCase is one directive of a data-driven script: comment lines, the
// directive, "----", and the expected output up to a blank line.
type scriptCase struct {
	comments []string
	cmd      string
	want     string
	line     int
}

func parseScript(t *testing.T, path string) []scriptCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []scriptCase
	var cur scriptCase
	state, n := 0, 0 // 0: before directive, 1: expect ----, 2: output
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(line, "#"):
			cur.comments = append(cur.comments, line)
		case state == 0 && strings.TrimSpace(line) == "":
		case state == 0:
			cur.cmd, cur.line, state = line, n, 1
		case state == 1 && line == "----":
			state = 2
		case state == 1:
			t.Fatalf("%s:%d: want ----, got %q", path, n, line)
		case line == "":
			cases, cur, state = append(cases, cur), scriptCase{}, 0
		default:
			cur.want += line + "\n"
		}
	}
	if state != 0 {
		cases = append(cases, cur)
	}
	return cases
}

func formatScript(cases []scriptCase) string {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, l := range c.comments {
			b.WriteString(l + "\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s", c.cmd, c.want)
	}
	return b.String()
}

// TestScripts runs every testdata/*.txt script against the machine and the
// demo agent.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScript(t, path)
		})
	}
}

func runScript(t *testing.T, path string) {
	cases := parseScript(t, path)
	h := newHarness(t)
	for i := range cases {
		got := h.do(cases[i].cmd)
		if got == "" {
			got = "ok\n"
		}
		if *rewrite {
			cases[i].want = got
			continue
		}
		if got != cases[i].want {
			t.Errorf("%s:%d: %s\n got:\n%s want:\n%s", path, cases[i].line, cases[i].cmd, got, cases[i].want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(formatScript(cases)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
