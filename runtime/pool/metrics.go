package pool

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are an owner process's Prometheus metrics and the Stats behind
// Owner.Stats.
type metrics struct {
	hibernations prometheus.Counter
	wakes        *prometheus.CounterVec // by source and outcome
	findings     *prometheus.CounterVec // by sweeper
	quarantinedG prometheus.Gauge
	steps        *prometheus.HistogramVec // step duration by outcome
	inboxLag     prometheus.Histogram     // command stored → read by its session
	handoffs     *prometheus.CounterVec   // by outcome (completed, failed, skipped) and reason
	rejections   prometheus.Counter       // wire.rejected events committed
	conflicts    *prometheus.CounterVec   // lost CASes by operation
	renewals     *prometheus.CounterVec   // lease renewals by result
	fences       prometheus.Counter       // self-fencing
	pauses       prometheus.Counter       // overdue lease renewals (sessions paused)
	stepFailures *prometheus.CounterVec   // failed steps by code
	stepRetries  *prometheus.CounterVec   // steps run again by the code they failed with
	idleExpired  prometheus.Counter       // sessions ended with reason idle_expired
	deleted      *prometheus.CounterVec   // sessions deleted, by reason
	live         *prometheus.CounterVec   // live events by result (published, failed, dropped)
	sends        *prometheus.CounterVec   // commands for other sessions by kind and result
	finishes     *prometheus.CounterVec   // operators' finishes of quarantined sessions by outcome
	indexed      *prometheus.CounterVec   // the index reconciler's work by kind (session, repaired, removed, rebuild)
	mu           sync.Mutex
	stats        Stats
}

// Stats is a snapshot of an owner process's hibernation counters (also
// exported as Prometheus metrics, see docs/driver.md).
type Stats struct {
	Loaded       int                         // sessions running in this process now
	MaxLoaded    int                         // the most ever running at once
	Hibernations uint64                      // sessions this process hibernated
	Wakes        map[protocol.WakeSource]int // wake requests served, by source
	Findings     uint64                      // hibernated sessions the inbox sweeper woke
	Fences       uint64                      // times this process fenced itself
	Pauses       uint64                      // times its lease renewal was overdue (every session paused)
}

func newMetrics(reg prometheus.Registerer, loaded func() float64) (*metrics, error) {
	m := &metrics{
		hibernations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_owner_hibernations_total",
			Help: "Sessions this owner process hibernated (record CASed to hibernated, consumer deleted).",
		}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_wakes_total",
			Help: "Wake requests served, by source (ingress, task, sweeper, self, resume, takeover, restart, other) and outcome.",
		}, []string{"source", "outcome"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_sweeper_findings_total",
			Help: "Sessions a sweeper acted on: inbox = hibernated with an unprocessed command, orphan = owner process without a live lease.",
		}, []string{"sweeper"}),
		quarantinedG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_owner_sessions_quarantined",
			Help: "Quarantined sessions of this deployment (no owner runs them until an operator retries or ends them), as of the last orphan sweep.",
		}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_owner_step_seconds",
			Help:    "Duration of agent steps by outcome (continue, done, input, authorize, task, finish, error).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"outcome"}),
		inboxLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baton_owner_inbox_lag_seconds",
			Help:    "From a command's storage in BATON_INBOX to its session reading it (a hibernated session's lag includes its wake).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_handoffs_total",
			Help: "Handoff events committed by this process's sessions, by outcome (started, completed, failed, skipped) and skip reason.",
		}, []string{"outcome", "reason"}),
		rejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_owner_wire_rejections_total",
			Help: "Inbox commands rejected as undecodable (wire.rejected events committed).",
		}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_cas_conflicts_total",
			Help: "Session record CASes that lost (ownership moved on), by operation (commit, claim, hibernate).",
		}, []string{"op"}),
		stepFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_step_failures_total",
			Help: "Step attempts that failed with a code (event_invalid, event_too_large, result_invalid, agent_panic, step_timeout, agent_timeout, agent_unavailable, agent_retryable, …), each attempt of a retried step counted.",
		}, []string{"code"}),
		live: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_live_events_total",
			Help: "Live events (message.delta, message.discarded) by result: published, failed (the connection refused the publish), dropped (a step's live buffer was full).",
		}, []string{"result"}),
		sends: newSendsMetric(), finishes: newFinishesMetric(), indexed: newIndexedMetric(), stepRetries: newStepRetriesMetric(),
		idleExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_owner_sessions_idle_expired_total",
			Help: "Sessions this owner process ended with reason idle_expired (no command for --end-idle-after).",
		}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_sessions_deleted_total",
			Help: "Sessions this owner process deleted, by reason (user, retention: --retain-ended, parent: with their parent).",
		}, []string{"reason"}),
		stats: Stats{Wakes: map[protocol.WakeSource]int{}},
	}
	m.renewals, m.fences, m.pauses = leaseMetrics()
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.hibernations, m.wakes, m.findings, m.quarantinedG,
		m.steps, m.inboxLag, m.handoffs, m.rejections, m.conflicts, m.renewals, m.fences, m.pauses, m.stepFailures, m.stepRetries, m.live, m.sends, m.finishes, m.indexed, m.idleExpired, m.deleted,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "baton_owner_sessions_loaded",
			Help: "Sessions running in this owner process (each with a live inbox consumer).",
		}, loaded)}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// leaseMetrics are the counters of the lease: renewals by result, fences
// and pauses.
func leaseMetrics() (*prometheus.CounterVec, prometheus.Counter, prometheus.Counter) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_owner_lease_renewals_total",
			Help: "Lease renewals by result (ok, error).",
		}, []string{"result"}),
		prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_owner_fenced_total",
			Help: "Times this process fenced itself (lease lost or not renewed in time): every session stopped.",
		}),
		prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_owner_lease_pauses_total",
			Help: "Times this process's lease renewal was overdue (every session paused until a renewal landed, or the process fenced).",
		})
}

func (m *metrics) paused() {
	m.pauses.Inc()
	m.mu.Lock()
	m.stats.Pauses++
	m.mu.Unlock()
}

func (m *metrics) fenced() {
	m.fences.Inc()
	m.mu.Lock()
	m.stats.Fences++
	m.mu.Unlock()
}

func (m *metrics) hibernated() {
	m.hibernations.Inc()
	m.mu.Lock()
	m.stats.Hibernations++
	m.mu.Unlock()
}

// wake counts a wake request served, by source and outcome.
func (m *metrics) wake(source protocol.WakeSource, outcome string) {
	m.wakes.WithLabelValues(string(source), outcome).Inc()
	m.mu.Lock()
	m.stats.Wakes[source]++
	m.mu.Unlock()
}

func (m *metrics) found(sweeper string, n int) {
	m.findings.WithLabelValues(sweeper).Add(float64(n))
	if sweeper == "inbox" {
		m.mu.Lock()
		m.stats.Findings += uint64(n)
		m.mu.Unlock()
	}
}

func (m *metrics) loadedNow(n int) {
	m.mu.Lock()
	m.stats.Loaded = n
	m.stats.MaxLoaded = max(m.stats.MaxLoaded, n)
	m.mu.Unlock()
}

// Stats returns a snapshot of this process's hibernation counters.
func (o *Owner) Stats() Stats {
	o.metrics.mu.Lock()
	defer o.metrics.mu.Unlock()
	st := o.metrics.stats
	st.Wakes = make(map[protocol.WakeSource]int, len(o.metrics.stats.Wakes))
	for k, v := range o.metrics.stats.Wakes {
		st.Wakes[k] = v
	}
	return st
}

// committed counts the handoff and rejection events of a commit.
func (m *metrics) committed(events []wire.Event) {
	for _, e := range events {
		switch e.Kind {
		case wire.EventHandoffStarted, wire.EventHandoffCompleted, wire.EventHandoffFailed:
			m.handoffs.WithLabelValues(strings.TrimPrefix(e.Kind, "handoff."), "").Inc()
		case wire.EventHandoffSkipped:
			var d struct {
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(e.Data, &d)
			m.handoffs.WithLabelValues("skipped", d.Reason).Inc()
		case wire.EventWireRejected:
			m.rejections.Inc()
		}
	}
}

func (m *metrics) stepDone(d runtime.StepDone, took time.Duration) {
	outcome := string(d.Result.Outcome)
	if d.Result.Error != "" {
		outcome = "error"
	}
	m.steps.WithLabelValues(outcome).Observe(took.Seconds())
}

// stepFailed counts a failed step by its code (none for the agent's own
// errors and for steps that did not fail).
func (m *metrics) stepFailed(code string) {
	if code != "" {
		m.stepFailures.WithLabelValues(code).Inc()
	}
}

// The metrics observe every session of the process (session.Observer).
var _ session.Observer = (*metrics)(nil)

// Committed counts a commit's events.
func (m *metrics) Committed(events []wire.Event) { m.committed(events) }

// Conflict counts a lost CAS of op ("commit", "hibernate").
func (m *metrics) Conflict(op string) { m.conflicts.WithLabelValues(op).Inc() }

// StepDone observes a finished step.
func (m *metrics) StepDone(d runtime.StepDone, took time.Duration) { m.stepDone(d, took) }

// StepFailed counts a failed step by its code.
func (m *metrics) StepFailed(code string) { m.stepFailed(code) }

// StepRetried counts a step that runs again, by the code it failed with.
func (m *metrics) StepRetried(code string) { m.stepRetries.WithLabelValues(code).Inc() }

// Hibernated counts a hibernation.
func (m *metrics) Hibernated() { m.hibernated() }

// IdleExpired counts a session ended with reason idle_expired.
func (m *metrics) IdleExpired() { m.idleExpired.Inc() }

// LiveDropped counts deltas a step's live buffer had no room for.
func (m *metrics) LiveDropped(n int) { m.live.WithLabelValues("dropped").Add(float64(n)) }

// InboxLag observes how long a command waited in the inbox.
func (m *metrics) InboxLag(d time.Duration) { m.inboxLag.Observe(d.Seconds()) }

func newStepRetriesMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_owner_step_retries_total",
		Help: "Failed steps run again under --step-retries, by the code the attempt failed with (agent_timeout, agent_unavailable, agent_retryable); counted when the retry starts.",
	}, []string{"code"})
}

func newSendsMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_owner_session_sends_total",
		Help: "Commands this process's sessions sent other sessions (subagents: deliver, cancel, end, child.result, child.waiting, child.resumed), by kind and result: sent (stored in the receiver's inbox; a new child created first), dropped (the receiver has ended), retried (an attempt that failed and was retried), pending (a child-creating send whose deployment had no live owner, retried outside the session loop), unavailable (a pending send that timed out or whose deployment was retired: the delegation failed with child_unavailable).",
	}, []string{"kind", "result"})
}

// sent counts one send to another session by kind and result.
func (m *metrics) sent(kind wire.Kind, result string) {
	m.sends.WithLabelValues(string(kind), result).Inc()
}

func newFinishesMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_owner_finishes_total",
		Help: "Operators' finishes of quarantined sessions this process carried out or tried, by outcome: ended, retried, or the error code (refused: none pending; conflict: another finisher won; unavailable).",
	}, []string{"outcome"})
}

// finished counts one finish by its outcome, or its error's code.
func (m *metrics) finished(outcome string, err *protocol.ReplyError) {
	if err != nil {
		outcome = string(err.Code)
	}
	m.finishes.WithLabelValues(outcome).Inc()
}

func newIndexedMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_owner_index_reconciled_total",
		Help: "The session index reconciler's work, by kind: checked (sessions whose entry it checked), repaired (entries or postings it wrote), removed (entries or postings it deleted), rebuilt (sessions a rebuild checked).",
	}, []string{"kind"})
}
