package main

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// depSummary is one deployment of the drain report, summed over its pages.
type depSummary struct {
	retired bool
	states  map[string]int
	idle    int
	why     map[string]int // not idle, by why
	total   int            // sessions not ended
}

func summarise(d *ingress.DeploymentReport) *depSummary {
	s := &depSummary{retired: d.Retired, states: d.Sessions, idle: d.Idle, why: map[string]int{}, total: harness.Live(d)}
	for _, n := range d.NotIdle {
		s.why[n.Why]++
	}
	return s
}

// report reads the drain report on green's ingress.
func (f *full) report(ctx context.Context) (map[string]*depSummary, error) {
	rep, err := client.DrainReport(ctx, f.c.green, 5000, harness.Bearer(f.token))
	if err != nil {
		return nil, err
	}
	out := map[string]*depSummary{}
	for dep, d := range rep {
		out[dep] = summarise(d)
	}
	return out, nil
}

func (s *depSummary) String() string {
	if s == nil {
		return "none"
	}
	keys := func(m map[string]int) string {
		var ks []string
		for k, v := range m {
			if v > 0 {
				ks = append(ks, fmt.Sprintf("%s=%d", k, v))
			}
		}
		sort.Strings(ks)
		return strings.Join(ks, " ")
	}
	r := ""
	if s.retired {
		r = " RETIRED"
	}
	return fmt.Sprintf("%d sessions (%s) idle=%d notIdle{%s}%s", s.total, keys(s.states), s.idle, keys(s.why), r)
}

// waitDrained polls the drain report every 2 s and prints it, until blue
// holds only the sessions that cannot or will not move by delivery: the
// hitl ones (why=input) and the quiet ones (idle, no traffic).
func (f *full) waitDrained(ctx context.Context, switched time.Time) error {
	want := len(f.ofKind(kHITL)) + len(f.ofKind(kQuiet))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rep, err := f.report(ctx)
		if err != nil {
			log.Printf("%s drain report: %v", f.since(), err)
		} else {
			b := rep[f.c.blueID]
			log.Printf("%s drain report: blue %v | green %v", f.since(), b, rep[f.c.greenID])
			if b != nil && b.total <= want && b.why["busy"]+b.why["queued"]+b.why["task"] == 0 {
				d := time.Since(switched)
				f.figure("time to drain (traffic switch → blue holds only its %d hitl+quiet sessions): %v", want, d.Round(100*time.Millisecond))
				return nil
			}
		}
		if time.Now().After(deadline) || !harness.Sleep(ctx, 2*time.Second) {
			return fmt.Errorf("blue never drained to its hitl and quiet sessions (last report: %v)", err)
		}
	}
}
