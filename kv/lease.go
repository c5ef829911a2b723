package kv

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// MinLeaseTTL is the shortest lease TTL: the server's per-message TTL
// resolution is one second.
const MinLeaseTTL = time.Second

// Lease is the value of baton_owners/lease.<processID>. A live owner process
// holds its own lease (Holder empty) and renews it; when it expires an
// adopter takes the key over (Holder = the adopter's process ID), so the dead
// process can never renew it.
type Lease struct {
	ProcessID    string `json:"processId"`
	DeploymentID string `json:"deploymentId,omitempty"` // empty after a takeover (the expired value is gone)
	// Instance is a nonce of the process run that wrote the lease, so that
	// run can recognise its own lease after an uncertain renewal, and a new
	// run of the same process ID (or a duplicate) is never mistaken for it.
	Instance string    `json:"instance,omitempty"`
	Holder   string    `json:"holder,omitempty"`
	TakenAt  time.Time `json:"takenAt,omitzero"`
	// TTL is the per-key TTL the write carried (set by the write): the
	// lease expires TTL after its last renewal unless renewed again.
	TTL time.Duration `json:"ttlNs,omitempty"`
}

// LeaseEvent is one change of a lease key seen by WatchLeases.
type LeaseEvent struct {
	ProcessID string
	Expired   bool   // the lease expired, was released or deleted (a marker)
	Lease     *Lease // the value; nil for Expired or when Err is set
	Revision  uint64
	Initial   bool  // part of the state present when the watch started
	Err       error // the value could not be decoded
}

var processRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// validProcess checks an owner process ID: [A-Za-z0-9_-]{1,128}, one key
// segment of lease.<processID> and index.<processID>.<sessionID>.
func validProcess(id string) error {
	if !processRE.MatchString(id) {
		return invalid("process ID %q must match [A-Za-z0-9_-]{1,128}", id)
	}
	return nil
}

// validTTL checks a lease TTL against what the owners bucket honours (see
// minLeaseTTL): a TTL the server would silently stretch is refused.
func (s *Store) validTTL(ttl time.Duration) error {
	if ttl%time.Second != 0 || ttl < MinLeaseTTL {
		return invalid("lease TTL %v: must be a whole number of seconds, at least %v", ttl, MinLeaseTTL)
	}
	if ttl < s.minTTL {
		return invalid("lease TTL %v: bucket %s keeps %d revisions per key with %v delete markers, so the server would stretch it to %v; "+
			"leases need History 1 on that bucket", ttl, s.owners.name, s.owners.history, s.owners.markerTTL, s.minTTL)
	}
	return nil
}

func (l Lease) validate() error {
	if err := validProcess(l.ProcessID); err != nil {
		return err
	}
	if l.Holder != "" {
		if err := validProcess(l.Holder); err != nil {
			return err
		}
	}
	if l.DeploymentID != "" || l.Holder == "" {
		if err := subjects.ValidateDeployment(l.DeploymentID); err != nil {
			return invalid("lease %s: %w", l.ProcessID, err)
		}
	}
	return nil
}

func (s *Store) encodeLease(l Lease, ttl time.Duration) (string, []byte, error) {
	if err := l.validate(); err != nil {
		return "", nil, err
	}
	if err := s.validTTL(ttl); err != nil {
		return "", nil, err
	}
	key := subjects.LeaseKey(l.ProcessID)
	l.TTL = ttl
	data, err := s.owners.encode(key, l)
	return key, data, err
}

// AcquireLease creates a process's own lease (Holder empty) with a per-key
// TTL, create-only; it succeeds over an expired or released lease. A live
// lease is an *record.OwnedError naming its holder.
func (s *Store) AcquireLease(ctx context.Context, l Lease, ttl time.Duration) (uint64, error) {
	if l.Holder != "" {
		return 0, invalid("acquire lease %s: holder must be empty (a takeover is TakeoverLease)", l.ProcessID)
	}
	key, data, err := s.encodeLease(l, ttl)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.owners, key, s.ttlWrite(s.owners, key, data, ttl), leaseHolder)
}

func leaseHolder(e entry) *record.OwnedError {
	var l Lease
	if json.Unmarshal(e.data, &l) != nil {
		return nil
	}
	if l.Holder != "" {
		return &record.OwnedError{Owner: l.Holder}
	}
	return &record.OwnedError{Owner: l.ProcessID}
}

// RenewLease rewrites the lease at rev with a fresh TTL. It publishes to the
// key's subject with an expected last sequence and a message TTL: a
// kv.Update would drop the TTL and the lease would never expire (docs/nats-layout.md, "NATS facts").
// An expired, released or taken-over lease is record.ErrConflict. Like every
// CAS here, a transient refusal while the key's last write is still applying
// is sent again while the leader shows the lease at rev (settleCAS).
func (s *Store) RenewLease(ctx context.Context, l Lease, rev uint64, ttl time.Duration) (uint64, error) {
	key, data, err := s.encodeLease(l, ttl)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, invalid("renew lease %s: revision 0", l.ProcessID)
	}
	write := s.ttlWrite(s.owners, key, data, ttl)
	return s.settleCAS(ctx, s.owners, key, rev, func() (uint64, error) { return write(ctx, rev) })
}

// TakeoverLease takes the lease key of processID for taker, only if it is
// expired, released or missing: a conditional write at the marker's
// revision (or on an empty key), with a TTL, so the dead holder's RenewLease
// fails from then on. A live lease is an *record.OwnedError naming its holder.
func (s *Store) TakeoverLease(ctx context.Context, processID, taker string, ttl time.Duration) (uint64, error) {
	if processID == taker {
		return 0, invalid("take over lease %s: taker is the process itself", processID)
	}
	l := Lease{ProcessID: processID, Holder: taker, TakenAt: s.now()}
	key, data, err := s.encodeLease(l, ttl)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.owners, key, s.ttlWrite(s.owners, key, data, ttl), leaseHolder)
}

// GetLease reads processID's lease from the stream leader: the value and its
// revision. An expired, released or missing lease is record.ErrNotFound. A read is
// a hint (the lease may expire right after it); only a renewal or takeover
// CAS decides.
func (s *Store) GetLease(ctx context.Context, processID string) (Lease, uint64, error) {
	if err := validProcess(processID); err != nil {
		return Lease{}, 0, err
	}
	e, err := s.leaderLast(ctx, s.owners, subjects.LeaseKey(processID))
	if err != nil {
		return Lease{}, 0, err
	}
	var l Lease
	if err := decode(e, &l); err != nil {
		return Lease{}, 0, err
	}
	return l, e.rev, nil
}

// ReleaseLease removes the lease at rev (graceful shutdown) with a purge
// marker that itself expires after the bucket's marker TTL, so released
// leases do not accumulate. A stale rev is record.ErrConflict; a transient
// refusal is settled like RenewLease's.
func (s *Store) ReleaseLease(ctx context.Context, processID string, rev uint64) error {
	if err := validProcess(processID); err != nil {
		return err
	}
	if rev == 0 {
		return invalid("release lease %s: revision 0", processID)
	}
	key := subjects.LeaseKey(processID)
	_, err := s.settleCAS(ctx, s.owners, key, rev, func() (uint64, error) {
		err := s.owners.kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(s.owners.markerTTL))
		return 0, mapErr("release", key, err)
	})
	return err
}

// WatchLeases streams every lease key's changes: first the current state
// (Initial), then live changes. An expiry shows as Expired at about the TTL.
// The channel closes when ctx ends (or the watch fails).
func (s *Store) WatchLeases(ctx context.Context) (<-chan LeaseEvent, error) {
	w, err := s.owners.kv.Watch(ctx, subjects.LeaseKeys())
	if err != nil {
		return nil, mapErr("watch", subjects.LeaseKeys(), err)
	}
	out := make(chan LeaseEvent, 64)
	go forwardLeases(ctx, w, out)
	return out, nil
}

func forwardLeases(ctx context.Context, w jetstream.KeyWatcher, out chan<- LeaseEvent) {
	defer close(out)
	defer stopWatch(w)
	initial := true
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return
		case e, ok = <-w.Updates():
		}
		switch {
		case !ok:
			return
		case e == nil: // end of the initial state
			initial = false
			continue
		}
		ev, keep := leaseEvent(e, initial)
		if !keep {
			continue
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// stopWatch stops the watcher and drains it, so its delivery callback
// (which blocks on a full channel) can finish and the channel close.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	for range w.Updates() {
	}
}

func leaseEvent(e jetstream.KeyValueEntry, initial bool) (LeaseEvent, bool) {
	pid, err := subjects.ParseLeaseKey(e.Key())
	if err != nil {
		return LeaseEvent{}, false
	}
	ev := LeaseEvent{ProcessID: pid, Revision: e.Revision(), Initial: initial}
	if e.Operation() != jetstream.KeyValuePut {
		ev.Expired = true
		return ev, true
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		ev.Err = err
		return ev, true
	}
	ev.Lease = &l
	return ev, true
}
