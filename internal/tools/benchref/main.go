// Command benchref builds and checks make bench's reference
// (docs/bench-reference.txt):
//
//	benchref build RUN...   the reference of the BENCH lines of the run
//	                        files: each figure's median ratio, spread and
//	                        tolerance (REF lines, on standard output)
//	benchref check REF      the BENCH lines on standard input against REF:
//	                        a line per figure; exit 1 when one is worse than
//	                        its reference by more than its tolerance
//
// It reads files and prints; it imports internal/bench only.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/baton-rt/baton/internal/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchref:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	switch {
	case len(args) >= 2 && args[0] == "build":
		return build(args[1:], out)
	case len(args) == 2 && args[0] == "check":
		return check(args[1], in, out)
	}
	return fmt.Errorf("usage: benchref build RUN... | benchref check REF < bench-output")
}

func build(files []string, out io.Writer) error {
	var runs [][]bench.Line
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		ls, err := bench.ParseLines(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, ls)
	}
	_, err := io.WriteString(out, bench.FormatReference(bench.BuildReference(runs)))
	return err
}

func check(refFile string, in io.Reader, out io.Writer) error {
	f, err := os.Open(refFile)
	if err != nil {
		return err
	}
	ref, err := bench.ParseReference(f)
	f.Close()
	if err != nil {
		return err
	}
	run, err := bench.ParseLines(in)
	if err != nil {
		return err
	}
	worse := 0
	for _, v := range bench.Check(ref, run) {
		switch {
		case v.Ratio == 0:
			fmt.Fprintf(out, "MISSING %-28s reference %.3f: the run has no such figure\n", v.Figure.Name, v.Figure.Ratio)
		case v.Worse:
			worse++
			fmt.Fprintf(out, "WORSE   %-28s %.3f vs %.3f: %+.1f %% (tolerance %.1f %%)\n", v.Figure.Name, v.Ratio, v.Figure.Ratio, 100*v.Change, 100*v.Figure.Tolerance)
		default:
			fmt.Fprintf(out, "ok      %-28s %.3f vs %.3f: %+.1f %% (tolerance %.1f %%)\n", v.Figure.Name, v.Ratio, v.Figure.Ratio, 100*v.Change, 100*v.Figure.Tolerance)
		}
	}
	if worse > 0 {
		return fmt.Errorf("%d figures worse than %s beyond their tolerance", worse, refFile)
	}
	return nil
}
