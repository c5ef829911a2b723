package main

import (
	"context"
	"fmt"
	"log"
	"time"
)

// figure records and prints a measured figure of the run.
func (f *full) figure(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	f.figures = append(f.figures, s)
	log.Printf("FIGURE %s", s)
}

// note records and prints an observation that is not a failure.
func (f *full) note(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	f.notes = append(f.notes, s)
	log.Printf("NOTE %s", s)
}

// since is the time since the scenario started, for log lines.
func (f *full) since() string { return fmt.Sprintf("t+%5.1fs", time.Since(f.start).Seconds()) }

// printFigures counts each owner's fences and prints every figure and note.
func (f *full) printFigures(ctx context.Context) {
	for _, p := range owners {
		svc := "owner-" + p
		if cid := f.cids[svc]; cid != "" {
			n := countLog(ctx, cid, f.start, "fenced: stopping every session")
			f.figure("%s fenced itself %d times during the run (lease not renewed within TTL−TTL/4, including the partition)", svc, n)
		}
	}
	log.Printf("---- figures ----")
	for _, s := range f.figures {
		log.Printf("  %s", s)
	}
	for _, s := range f.notes {
		log.Printf("  note: %s", s)
	}
}
