package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Binary describes a Baton command for Main.
type Binary[C any] struct {
	Name string // "owner", "ingress": the prefix of usage errors
	// Parse checks the flags and every value in them before anything runs:
	// an *Info is printed to stdout (exit 0), any other error is a usage
	// error (exit 2). See ParseFlags.
	Parse  func(args []string) (C, error)
	Logger func(cfg C, stderr io.Writer) *slog.Logger
	Run    func(ctx context.Context, cfg C, log *slog.Logger) error
}

// Main runs b with the process's arguments until SIGINT, SIGTERM or SIGHUP
// (all three drain: a closed terminal or a supervisor's reload signal must
// not kill a process without its drain) and exits: 0 after --help, --version or a clean shutdown, 2 for a usage
// error, 1 for a failure. A second signal aborts at once with 128 + its
// number, like a process the signal killed. The second signal is handled
// here rather than left to the default action, because a process started
// in the background by a script inherits SIGINT ignored, and letting go of
// the handler would restore that: the second Ctrl-C would do nothing.
func Main[C any](b Binary[C]) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, Signals...)
	go func() {
		<-sigs
		cancel()
		s := <-sigs
		fmt.Fprintf(os.Stderr, "%s: a second signal (%v): aborting\n", b.Name, s)
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
	os.Exit(Exec(ctx, b, os.Args[1:], os.Stdout, os.Stderr))
}

// Signals are the signals Main turns into the end of Run's context: the
// first drains, a second aborts.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// Exec is Main without the process: it returns the exit code.
func Exec[C any](ctx context.Context, b Binary[C], args []string, stdout, stderr io.Writer) int {
	cfg, err := b.Parse(args)
	var info *Info
	switch {
	case errors.As(err, &info):
		fmt.Fprint(stdout, info.Text)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for the flags.\n", b.Name, err, b.Name)
		return 2
	}
	log := b.Logger(cfg, stderr)
	if err := b.Run(ctx, cfg, log); err != nil {
		log.Error(b.Name+" stopped", KeyErr, err)
		return 1
	}
	return 0
}
