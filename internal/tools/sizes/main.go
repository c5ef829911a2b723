package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], allowList, os.Stdout, os.Stderr))
}

// run is the command, with its allow-list: 0 when nothing is over its limit, 1 when something
// is (each offender and stale entry on stdout), 2 on a usage or read error.
func run(args []string, allowed []allow, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("sizes", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", ".", "the module root to walk")
	lim := Limits{}
	fl.IntVar(&lim.File, "max-file", 600, "the most lines a file may have")
	fl.IntVar(&lim.Func, "max-func", 80, "the most lines a function may have")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	res, err := Check(*root, lim, allowed)
	if err != nil {
		fmt.Fprintln(stderr, "sizes:", err)
		return 2
	}
	report(stdout, res, lim)
	if res.Failed() {
		return 1
	}
	return 0
}

// report prints every offender, then every stale allow-list entry, then a
// summary line if there was anything.
func report(w io.Writer, res Result, lim Limits) {
	for _, o := range res.Offenders {
		fmt.Fprintln(w, o)
	}
	for _, a := range res.Stale {
		name := a.Func
		if name == "" {
			name = fileName
		}
		fmt.Fprintf(w, "%s %s: allowed in internal/tools/sizes/allow.go but not over the limits (split, renamed or gone); remove the entry\n", a.Path, name)
	}
	if res.Failed() {
		fmt.Fprintf(w, "sizes: %d over the limits (files %d lines, functions %d), %d stale allow-list entries; split them (or, for a declarative table, add an entry with its reason to internal/tools/sizes/allow.go)\n",
			len(res.Offenders), lim.File, lim.Func, len(res.Stale))
	}
}
