package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
)

// Info is what a binary prints for --help or --version instead of running:
// Main writes Text to stdout and exits 0.
type Info struct{ Text string }

func (i *Info) Error() string { return "help requested" }

// ParseFlags parses args into fs without writing anything: --help (or -h)
// returns an *Info with the usage (about, then the flags), --version (when
// fs has it) an *Info with the version; a bad flag or value is an ErrUsage
// error naming it, and so are arguments after the flags.
func ParseFlags(fs *flag.FlagSet, args []string, about string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return &Info{Text: usage(fs, about)}
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUsage, err)
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	if v := fs.Lookup("version"); v != nil && v.Value.String() == "true" {
		return &Info{Text: Version(fs.Name()) + "\n"}
	}
	return nil
}

func usage(fs *flag.FlagSet, about string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [flags]\n\n%s\n\nFlags:\n", fs.Name(), strings.TrimSpace(about))
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// Revision is the VCS revision of a build without VCS stamping (a git
// worktree, -buildvcs=false): make build sets it with -ldflags -X.
var Revision string

// Version is "<name> <module version>, revision <rev>[ (modified)],
// <commit time>, <go version>", from the build information the Go
// toolchain embeds (runtime/debug.ReadBuildInfo), with Revision when the
// build carries no VCS stamp.
func Version(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information)"
	}
	rev, at, modified := Revision, "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	parts := []string{name + " " + bi.Main.Version, "revision " + rev + modified}
	if at != "" {
		parts = append(parts, at)
	}
	return strings.Join(append(parts, bi.GoVersion), ", ")
}

// CheckAddr checks a host:port listen address (the host may be empty, the
// port 0 picks a free one) before anything is started.
func CheckAddr(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s %q: want host:port (%v)", ErrUsage, flagName, addr, err)
	}
	return nil
}
