package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("docimports", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", ".", "the module root to walk")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	pkgs, err := Load(*root)
	if err != nil {
		fmt.Fprintln(stderr, "docimports:", err)
		return 2
	}
	bad := Check(pkgs)
	for _, b := range bad {
		fmt.Fprintln(stdout, b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(stdout, "docimports: %d package doc claim(s) about imports are false\n", len(bad))
		return 1
	}
	return 0
}
