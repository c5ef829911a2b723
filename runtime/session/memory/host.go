package memory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
)

// Host is the process's ports (session.Process, Handoffs, Tasks and Sends)
// for tests: the lease is a flag, a handoff is handed to OnHandoff (nil:
// session.ErrHandoffDisabled), tasks are accepted, and handoff requests,
// index removals and settled sessions are recorded.
type Host struct {
	lease    atomic.Bool
	draining atomic.Bool
	// OnHandoff runs the handoff transaction (nil: handoff disabled).
	OnHandoff func(ctx context.Context, req handoff.Request) (handoff.Result, error)

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	reconn   chan struct{}
	removed  []string
	settled  []string
	handoffs []handoff.Request
	tasks    []runtime.TaskSpec
	sends    []runtime.Send
}

// NewHost returns a host holding a valid lease.
func NewHost() *Host {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{ctx: ctx, cancel: cancel, reconn: make(chan struct{})}
	h.lease.Store(true)
	return h
}

var (
	_ session.Process  = (*Host)(nil)
	_ session.Handoffs = (*Host)(nil)
	_ session.Tasks    = (*Host)(nil)
	_ session.Sends    = (*Host)(nil)
)

// SetLease makes the lease valid or not.
func (h *Host) SetLease(valid bool) { h.lease.Store(valid) }

// SetDraining starts (or ends) a drain.
func (h *Host) SetDraining(on bool) { h.draining.Store(on) }

// Reconnect signals a reconnect to every session.
func (h *Host) Reconnect() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.reconn)
	h.reconn = make(chan struct{})
}

// Close cancels background work and waits for it.
func (h *Host) Close() {
	h.cancel()
	h.bg.Wait()
}

func (h *Host) LeaseValid() bool { return h.lease.Load() }

// AwaitLease never pauses: a lease this host does not hold is a fence.
func (h *Host) AwaitLease(context.Context) error {
	if !h.lease.Load() {
		return session.ErrFenced
	}
	return nil
}
func (h *Host) Draining() bool { return h.draining.Load() }

func (h *Host) Handoff(ctx context.Context, req handoff.Request) (handoff.Result, error) {
	h.mu.Lock()
	h.handoffs = append(h.handoffs, req)
	f := h.OnHandoff
	h.mu.Unlock()
	if f == nil {
		return handoff.Result{}, session.ErrHandoffDisabled
	}
	return f(ctx, req)
}

// StartTask records the task (nothing runs it).
func (h *Host) StartTask(_ context.Context, _ string, t runtime.TaskSpec) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tasks = append(h.tasks, t)
	return nil
}

// Tasks are the tasks started so far, in order.
func (h *Host) Tasks() []runtime.TaskSpec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]runtime.TaskSpec(nil), h.tasks...)
}

func (h *Host) RemoveIndex(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removed = append(h.removed, id)
	return nil
}

func (h *Host) Go(f func(ctx context.Context)) {
	h.bg.Go(func() { f(h.ctx) })
}

func (h *Host) Reconnected() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reconn
}

func (h *Host) Settled(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settled = append(h.settled, id)
}

// Handoffs are the handoff requests the sessions made, in order.
func (h *Host) Handoffs() []handoff.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]handoff.Request(nil), h.handoffs...)
}

// Removed are the sessions dropped from the index, in order.
func (h *Host) Removed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.removed...)
}

// Send records the sends (nothing delivers them); none is pending.
func (h *Host) Send(_ context.Context, _ string, sends []runtime.Send) ([]runtime.Send, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sends = append(h.sends, sends...)
	return nil, nil
}

// SendPending records the send as sent: it left.
func (h *Host) SendPending(_ context.Context, _ string, p runtime.PendingSend, _ time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sends = append(h.sends, p.Send)
	return nil
}

// Retired: no deployment of the memory host is retired.
func (h *Host) Retired(context.Context, string) (bool, error) { return false, nil }

// Sends are the commands the sessions sent so far, in order.
func (h *Host) Sends() []runtime.Send {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]runtime.Send(nil), h.sends...)
}

// ReadsInbox: every deployment of the memory host reads every version.
func (h *Host) ReadsInbox(context.Context, string, int) (bool, error) { return true, nil }
