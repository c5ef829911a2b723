package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Binary describes a Baton command for Main.
type Binary[C any] struct {
	Name   string                                           // "owner", "ingress": the prefix of usage errors
	Parse  func(args []string, stderr io.Writer) (C, error) // flags; an error is a usage error
	Logger func(cfg C, stderr io.Writer) *slog.Logger
	Run    func(ctx context.Context, cfg C, log *slog.Logger) error
}

// Main runs b with the process's arguments until SIGINT or SIGTERM (a
// second signal kills the process) and exits: 2 for a usage error, 1 for a
// failure, 0 after a clean shutdown.
func Main[C any](b Binary[C]) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	os.Exit(Exec(ctx, b, os.Args[1:], os.Stderr))
}

// Exec is Main without the process: it returns the exit code.
func Exec[C any](ctx context.Context, b Binary[C], args []string, stderr io.Writer) int {
	cfg, err := b.Parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "%s: %v\n", b.Name, err)
		}
		return 2
	}
	log := b.Logger(cfg, stderr)
	if err := b.Run(ctx, cfg, log); err != nil {
		log.Error(b.Name+" stopped", KeyErr, err)
		return 1
	}
	return 0
}
