package chaos

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-rt/baton/internal/harness"
)

// The faults, drawn at random.
const (
	faultKill   = "owner SIGKILL"
	faultStop   = "owner SIGSTOP 4s"
	faultTerm   = "owner SIGTERM"
	faultNATS   = "NATS node SIGKILL"
	stopFor     = 4 * time.Second
	natsDownFor = 5 * time.Second
)

// chaos strikes a fault about every every until d has passed, then waits
// for the faults still acting. Owner faults act on one owner of a
// deployment at a time (the other keeps serving it); at most one NATS
// node is down or catching up at a time.
type chaos struct {
	w        *world
	rng      *rand.Rand
	mu       sync.Mutex
	natsBusy bool
	wg       sync.WaitGroup
	counts   map[string]int
}

func (w *world) chaos(seed uint64, d, every time.Duration) map[string]int {
	c := &chaos{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), counts: map[string]int{}}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		// pacing of the faults, not synchronisation
		time.Sleep(every/2 + time.Duration(c.rng.Int64N(int64(every))))
		c.strike()
	}
	c.wg.Wait()
	return c.counts
}

// strike draws a fault among those that can act now and starts it.
func (c *chaos) strike() {
	kinds := []string{faultKill, faultStop, faultTerm, faultNATS}
	c.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for _, k := range kinds {
		if k == faultNATS {
			c.mu.Lock()
			free := !c.natsBusy
			c.natsBusy = true
			c.mu.Unlock()
			if free {
				c.counts[k]++
				i := c.rng.IntN(c.w.nats.N())
				c.wg.Go(func() { c.natsKill(i) })
				return
			}
			continue
		}
		if o := c.pickOwner(); o != nil {
			c.counts[k]++
			c.wg.Go(func() { c.owner(k, o) })
			return
		}
	}
}

// pickOwner takes (marks busy) an owner no fault acts on whose
// deployment's other owner no fault acts on either; nil if none.
func (c *chaos) pickOwner() *owner {
	busy := map[string]bool{}
	for _, o := range c.w.owners {
		o.mu.Lock()
		if o.busy {
			busy[o.dep] = true
		}
		o.mu.Unlock()
	}
	var free []*owner
	for _, o := range c.w.owners {
		if !busy[o.dep] {
			free = append(free, o)
		}
	}
	if len(free) == 0 {
		return nil
	}
	o := free[c.rng.IntN(len(free))]
	o.mu.Lock()
	o.busy = true
	o.mu.Unlock()
	return o
}

// owner acts kind on o, restarting it after a SIGKILL or SIGTERM.
func (c *chaos) owner(kind string, o *owner) {
	w := c.w
	defer func() {
		o.mu.Lock()
		o.busy = false
		o.mu.Unlock()
	}()
	name := o.name()
	p := o.current()
	w.note("%s %s", kind, name)
	struck := time.Now()
	switch kind {
	case faultStop:
		from := time.Now()
		if err := w.signal(o, syscall.SIGSTOP); err != nil {
			w.fail("SIGSTOP %s: %v", name, err)
			return
		}
		time.Sleep(stopFor) // the fault's length
		// The thaw's time is taken before the signal: the process may log
		// its fence before this goroutine runs again after sending it.
		to := time.Now()
		if err := w.signal(o, syscall.SIGCONT); err != nil {
			w.fail("SIGCONT %s: %v", name, err)
		}
		w.mu.Lock()
		w.freezes = append(w.freezes, freeze{name, from, to})
		w.ownerFaults = append(w.ownerFaults, span{from, to.Add(leaseTTL)})
		w.mu.Unlock()
		w.note("SIGCONT %s", name)
		return
	case faultKill:
		w.mu.Lock()
		w.kills = append(w.kills, harness.Killed(name, time.Now()))
		w.mu.Unlock()
		if err := w.signal(o, syscall.SIGKILL); err != nil {
			w.fail("SIGKILL %s: %v", name, err)
			return
		}
	case faultTerm:
		if err := w.signal(o, syscall.SIGTERM); err != nil {
			w.fail("SIGTERM %s: %v", name, err)
			return
		}
	}
	select {
	case <-p.Done():
	case <-time.After(wait):
		w.fail("%s did not exit within %s after %s", name, wait, kind)
		return
	}
	if kind == faultTerm && p.Cmd.ProcessState.ExitCode() != 0 {
		w.fail("%s: exit code %d after SIGTERM", name, p.Cmd.ProcessState.ExitCode())
	}
	if err := w.startOwner(o); err != nil {
		w.fail("%v", err)
		return
	}
	w.note("%s serving", o.name())
	w.mu.Lock()
	w.ownerFaults = append(w.ownerFaults, span{struck, later(time.Now(), struck.Add(leaseTTL))})
	w.mu.Unlock()
}

// natsKill kills node i, keeps it down natsDownFor, restarts it and waits
// until every node is current again.
func (c *chaos) natsKill(i int) {
	w := c.w
	defer func() {
		c.mu.Lock()
		c.natsBusy = false
		c.mu.Unlock()
	}()
	led := c.ledBy(i)
	w.note("%s n%d (it leads %s)", faultNATS, i+1, strings.Join(led, " "))
	if err := w.nats.Kill(i); err != nil {
		w.fail("kill NATS node n%d: %v", i+1, err)
		return
	}
	killed := time.Now()
	elected := make(chan time.Time, 1)
	go func() { elected <- c.elected(i, led, killed) }()
	defer func() {
		// The kill's stretch: until the node is current again and every
		// stream it led has a leader (its clients reconnect, the inbox
		// consumers it held are made again).
		end := later(time.Now(), <-elected)
		w.mu.Lock()
		w.natsFaults = append(w.natsFaults, span{killed, end})
		w.mu.Unlock()
	}()
	time.Sleep(natsDownFor) // the fault's length
	if err := w.nats.Restart(i); err != nil {
		w.fail("restart NATS node n%d: %v", i+1, err)
		return
	}
	w.note("n%d restarted", i+1)
	if err := w.nats.WaitReady(2 * wait); err != nil {
		w.fail("NATS node n%d not current after its restart: %v", i+1, err)
		return
	}
	w.note("n%d current", i+1)
}

// ledBy names the streams node i leads (a report for the trace: which
// waits its kill starts).
func (c *chaos) ledBy(i int) []string {
	w := c.w
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var led []string
	names := w.JS.StreamNames(ctx)
	for name := range names.Name() {
		if l, err := w.nats.Leader(ctx, w.JS, name); err == nil && l == i {
			led = append(led, name)
		}
	}
	slices.Sort(led)
	return led
}

// elected notes when each stream the killed node led has a leader again:
// how long the kill left it leaderless, seen by the test's own polls.
func (c *chaos) elected(i int, led []string, killed time.Time) time.Time {
	w := c.w
	if len(led) == 0 {
		return killed // nothing to elect
	}
	for len(led) > 0 && time.Since(killed) < wait {
		time.Sleep(100 * time.Millisecond) // polling the leader, not synchronisation
		led = slices.DeleteFunc(led, func(name string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			l, err := w.nats.Leader(ctx, w.JS, name)
			if err != nil || l == i {
				return false
			}
			w.note("%s has a leader again (n%d), %s after the kill of n%d", name, l+1, time.Since(killed).Round(100*time.Millisecond), i+1)
			return true
		})
	}
	w.mu.Lock()
	end := time.Now()
	w.elections = append(w.elections, span{killed, end})
	w.mu.Unlock()
	return end
}
