package main

import (
	"context"
	"log"
	"time"

	"github.com/baton-rt/baton/internal/harness"
)

// sseStream is an SSE client of one session on green's ingress from seq 0,
// resuming with Last-Event-ID whenever its stream ends.
type sseStream struct {
	s *fsess
	f *harness.Follower
}

// startSSE follows -sse sessions, one of each kind first.
func (f *full) startSSE(ctx context.Context) {
	seen := map[kind]bool{}
	for _, s := range f.sessions {
		if len(f.sse) >= f.f.sseStreams {
			break
		}
		if !seen[s.kind] || len(seen) == len(kindNames) {
			seen[s.kind] = true
			fl := harness.StartFollow(ctx, harness.Follow{
				Session: s.id, Pause: 500 * time.Millisecond,
				Base: func() (string, string) { return f.c.green, f.c.greenID },
			})
			f.sse = append(f.sse, &sseStream{s: s, f: fl})
		}
	}
	log.Printf("%s %d SSE streams open on green's ingress from seq 0", f.since(), len(f.sse))
}
