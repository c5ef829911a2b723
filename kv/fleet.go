package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// Fleet is a live view of the fleet's shape in baton_owners, followed by
// one KV watch over four key families: each deployment's agent
// (agent.*), its record (deploy.*: retired or not), the owner processes'
// leases (lease.*: which deployments have a live owner), and each
// agent's promoted deployment (promote.*). It is a hint, as fresh as the
// watch (a change is seen within milliseconds on a healthy connection);
// decisions that must not rest on a hint read the leader (Store.AgentOf,
// Store.Promoted, Store.DeploymentRetired). Safe for concurrent use; the
// watch ends with the context given to WatchFleet and is started again if
// the server ends it.
type Fleet struct {
	store *Store
	log   func(msg string, args ...any)

	mu       sync.RWMutex
	agents   map[string]string     // deployment → agent
	deploys  map[string]Deployment // deployment → record
	leases   map[string]liveLease  // process → its live own lease
	promoted map[string]promotion  // agent → promotion
	missing  map[string]time.Time  // deployments read from the leader without an agent key, and when
	changed  chan struct{}         // closed and replaced at every change
	loaded   chan struct{}         // closed when the first state is loaded
	endWatch context.CancelFunc    // ends the current watch's context (follow's goroutine only)
}

// liveLease is what the view keeps of a live own lease: its deployment,
// and when it expires unless renewed (zero: a build that did not write
// its TTL).
type liveLease struct {
	deployment string
	expires    time.Time
}

type promotion struct {
	Promotion
	rev uint64
}

// missingTTL bounds how long a deployment read without an agent key is
// taken for the default agent before it is read again.
const missingTTL = 2 * time.Second

// WatchFleet starts following the fleet until ctx ends; Loaded says when
// the current state is in the view. log, if not nil, reports a watch that
// failed and is being started again. A watch that cannot start (the
// owners bucket's stream without a leader for a while, the connection
// down: an owner started during a NATS node's restart) is tried again
// with backoff until it starts or ctx ends, whose error is returned.
func (s *Store) WatchFleet(ctx context.Context, log func(msg string, args ...any)) (*Fleet, error) {
	f := &Fleet{store: s, log: log, changed: make(chan struct{}), loaded: make(chan struct{}),
		agents: map[string]string{}, deploys: map[string]Deployment{}, leases: map[string]liveLease{},
		promoted: map[string]promotion{}, missing: map[string]time.Time{}}
	var w jetstream.KeyWatcher
	err := backoff.Retry(func() (err error) {
		if w, err = f.startWatch(ctx); err != nil && ctx.Err() == nil && log != nil {
			log("fleet watch failed; retrying", "err", err)
		}
		return err
	}, backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxInterval(2*time.Second), backoff.WithMaxElapsedTime(0)), ctx))
	if err != nil {
		return nil, err
	}
	go f.follow(ctx, w, f.loaded)
	return f, nil
}

// fleetWatchAttempt bounds one attempt to start the fleet watch: a start
// sent while the connection was down may never be answered.
const fleetWatchAttempt = 5 * time.Second

// startWatch starts a watch that lives until ctx ends, giving up after
// fleetWatchAttempt (the watch's own context is then cancelled, so one
// that starts late stops at once).
func (f *Fleet) startWatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	wctx, cancel := context.WithCancel(ctx)
	type started struct {
		w   jetstream.KeyWatcher
		err error
	}
	done := make(chan started, 1)
	go func() {
		w, err := f.watch(wctx)
		done <- started{w, err}
	}()
	t := time.NewTimer(fleetWatchAttempt)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			cancel()
			return nil, r.err
		}
		f.endWatch = cancel // the watch lives until follow replaces it, or ctx ends
		return r.w, nil
	case <-t.C:
		cancel()
		return nil, fmt.Errorf("kv: fleet watch: not started within %s", fleetWatchAttempt)
	}
}

// Loaded is closed once the view holds the state present when the watch
// started.
func (f *Fleet) Loaded() <-chan struct{} { return f.loaded }

func (f *Fleet) watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	keys := []string{subjects.AgentKeys(), subjects.DeploymentKeys(), subjects.LeaseKeys(), subjects.PromotionKeys()}
	w, err := f.store.owners.kv.WatchFiltered(ctx, keys)
	if err != nil {
		return nil, mapErr("watch", strings.Join(keys, ","), err)
	}
	return w, nil
}

// follow applies the watch's entries; a watch that ends before ctx is
// started again from the current state, over the view as it was (so it
// never shows an empty fleet meanwhile): what the new watch's current
// state does not hold is dropped once it has been read.
func (f *Fleet) follow(ctx context.Context, w jetstream.KeyWatcher, loaded chan struct{}) {
	for {
		f.apply(ctx, w, loaded)
		stopWatch(w)
		f.endWatch()
		for ctx.Err() == nil {
			var err error
			if w, err = f.startWatch(ctx); err == nil {
				break
			}
			if f.log != nil {
				f.log("fleet watch failed; retrying", "err", err)
			}
			sleep(ctx, 500*time.Millisecond)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (f *Fleet) apply(ctx context.Context, w jetstream.KeyWatcher, loaded chan struct{}) {
	seen := map[string]bool{} // the keys of the current state, until it is read
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				if seen != nil {
					seen[e.Key()] = true
				}
				f.entry(e)
				continue
			}
			if seen != nil {
				f.prune(seen)
				seen = nil
			}
			select {
			case <-loaded:
			default:
				close(loaded)
			}
		}
	}
}

// prune drops from the view every key a new watch's current state does
// not hold (gone while no watch ran).
func (f *Fleet) prune(seen map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for dep := range f.agents {
		if !seen[subjects.AgentKey(dep)] {
			delete(f.agents, dep)
		}
	}
	for dep := range f.deploys {
		if !seen[subjects.DeploymentKey(dep)] {
			delete(f.deploys, dep)
		}
	}
	for pid := range f.leases {
		if !seen[subjects.LeaseKey(pid)] {
			delete(f.leases, pid)
		}
	}
	for agent := range f.promoted {
		if !seen[subjects.PromotionKey(agent)] {
			delete(f.promoted, agent)
		}
	}
	f.notify()
}

// entry applies one watched entry.
func (f *Fleet) entry(e jetstream.KeyValueEntry) {
	put := e.Operation() == jetstream.KeyValuePut
	key := e.Key()
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	switch {
	case strings.HasPrefix(key, subjects.AgentKey("")):
		dep, err := subjects.ParseAgentKey(key)
		var a DeploymentAgent
		if err != nil || !put || json.Unmarshal(e.Value(), &a) != nil {
			delete(f.agents, dep)
			return
		}
		f.agents[dep] = a.Agent
		delete(f.missing, dep)
	case strings.HasPrefix(key, subjects.DeploymentKey("")):
		dep, err := subjects.ParseDeploymentKey(key)
		var d Deployment
		if err != nil || !put || json.Unmarshal(e.Value(), &d) != nil {
			delete(f.deploys, dep)
			return
		}
		f.deploys[dep] = d
	case strings.HasPrefix(key, subjects.LeaseKey("")):
		pid, err := subjects.ParseLeaseKey(key)
		var l Lease
		if err != nil || !put || json.Unmarshal(e.Value(), &l) != nil || l.Holder != "" || l.DeploymentID == "" {
			delete(f.leases, pid)
			return
		}
		f.leases[pid] = liveLease{deployment: l.DeploymentID, expires: e.Created().Add(l.TTL)}
	case strings.HasPrefix(key, subjects.PromotionKey("")):
		agent, err := subjects.ParsePromotionKey(key)
		var p Promotion
		if err != nil || !put || json.Unmarshal(e.Value(), &p) != nil {
			delete(f.promoted, agent)
			return
		}
		f.promoted[agent] = promotion{p, e.Revision()}
	}
}

// notify wakes the waiters of Changed; f.mu is held.
func (f *Fleet) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of the view.
func (f *Fleet) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// Agent returns the agent deployment dep belongs to. A deployment the view
// does not know (no agent key, or one written a moment ago) is read from
// the leader, so an agent key written before the call is never missed; a
// deployment without one belongs to subjects.DefaultAgent (remembered for
// a short while, then read again).
func (f *Fleet) Agent(ctx context.Context, dep string) (string, error) {
	f.mu.RLock()
	a, ok := f.agents[dep]
	at, miss := f.missing[dep]
	f.mu.RUnlock()
	if ok {
		return a, nil
	}
	if miss && time.Since(at) < missingTTL {
		return subjects.DefaultAgent, nil
	}
	a, err := f.store.AgentOf(ctx, dep)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.agents[dep]; !ok {
		f.missing[dep] = time.Now()
	}
	return a, nil
}

// KnownAgent returns the agent of dep as far as the view knows, without a
// read: the default agent for a deployment without an agent key.
func (f *Fleet) KnownAgent(dep string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if a, ok := f.agents[dep]; ok {
		return a
	}
	return subjects.DefaultAgent
}

// Promoted returns agent's promoted deployment and the promotion's
// revision; ok is false when none is promoted.
func (f *Fleet) Promoted(agent string) (dep string, rev uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.promoted[agent]
	return p.DeploymentID, p.rev, ok
}

// Retired reports whether dep's record says it is retired.
func (f *Fleet) Retired(dep string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.deploys[dep].Retired
}

// Reads returns the inbox wire versions dep's owners advertised, as the
// view holds them (a hint): none when the view has no record of dep, or
// its record names none (written by a build from before the
// advertisement, whose owners read version 1 only).
func (f *Fleet) Reads(dep string) []int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.deploys[dep].WireVersions)
}

// LiveOwners returns how many owner processes of dep hold a live lease.
func (f *Fleet) LiveOwners(dep string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, l := range f.leases {
		if l.deployment == dep {
			n++
		}
	}
	return n
}

// OwnerView is a live owner process of a deployment: its ID, and when its
// lease expires unless renewed (absent for a build that did not write its
// TTL).
type OwnerView struct {
	ProcessID      string     `json:"processId"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
}

// Owners returns dep's live owner processes, sorted by ID.
func (f *Fleet) Owners(dep string) []OwnerView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []OwnerView{}
	for pid, l := range f.leases {
		if l.deployment != dep {
			continue
		}
		v := OwnerView{ProcessID: pid}
		if !l.expires.IsZero() {
			at := l.expires.UTC()
			v.LeaseExpiresAt = &at
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b OwnerView) int { return strings.Compare(a.ProcessID, b.ProcessID) })
	return out
}

// Versions returns the inbox and checkpoint state versions dep's owners
// advertised (a hint; none for a build from before the advertisement).
func (f *Fleet) Versions(dep string) (inbox, state []int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.deploys[dep]
	return slices.Clone(d.WireVersions), slices.Clone(d.StateVersions)
}

// DeploymentIDs returns every deployment the view knows (an agent key, a
// record or a live owner), sorted.
func (f *Fleet) DeploymentIDs() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Sorted(maps.Keys(f.deployments()))
}

// deployments is the set of DeploymentIDs; f.mu is held.
func (f *Fleet) deployments() map[string]bool {
	seen := map[string]bool{}
	for d := range f.agents {
		seen[d] = true
	}
	for d := range f.deploys {
		seen[d] = true
	}
	for _, l := range f.leases {
		seen[l.deployment] = true
	}
	return seen
}

// AgentView is one agent as GET /v1/admin/agents shows it.
type AgentView struct {
	Agent       string           `json:"agent"`
	Promoted    string           `json:"promoted"`
	Revision    uint64           `json:"promotionRevision"`
	Deployments []DeploymentView `json:"deployments"`
	// Sessions counts the agent's sessions by state (its deployments'
	// sums; filled by the caller from the session index).
	Sessions map[string]int `json:"sessions,omitempty"`
}

// DeploymentView is one deployment of an AgentView.
type DeploymentView struct {
	DeploymentID string `json:"deploymentId"`
	Retired      bool   `json:"retired"`
	OwnersLive   int    `json:"ownersLive"`
	// Sessions counts its sessions by state (filled by the caller from
	// the session index).
	Sessions map[string]int `json:"sessions,omitempty"`
}

// Agents returns every agent the view knows, sorted by name, each with its
// deployments sorted by ID: the deployments with an agent key, a record
// or a live owner (those without an agent key belong to the default
// agent), and the agents with a promotion.
func (f *Fleet) Agents() []AgentView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	deps := f.deployments()
	live := map[string]int{}
	for _, l := range f.leases {
		live[l.deployment]++
	}
	byAgent := map[string]*AgentView{}
	view := func(agent string) *AgentView {
		v, ok := byAgent[agent]
		if !ok {
			v = &AgentView{Agent: agent, Deployments: []DeploymentView{}}
			byAgent[agent] = v
		}
		return v
	}
	for d := range deps {
		agent, ok := f.agents[d]
		if !ok {
			agent = subjects.DefaultAgent
		}
		v := view(agent)
		v.Deployments = append(v.Deployments, DeploymentView{DeploymentID: d, Retired: f.deploys[d].Retired, OwnersLive: live[d]})
	}
	for agent, p := range f.promoted {
		v := view(agent)
		v.Promoted, v.Revision = p.DeploymentID, p.rev
	}
	out := make([]AgentView, 0, len(byAgent))
	for _, v := range byAgent {
		slices.SortFunc(v.Deployments, func(a, b DeploymentView) int { return strings.Compare(a.DeploymentID, b.DeploymentID) })
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b AgentView) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
