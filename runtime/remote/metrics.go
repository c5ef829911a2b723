package remote

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the remote agent's: steps by result, no-responders retries.
type metrics struct {
	steps   *prometheus.CounterVec
	retries prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_remote_steps_total",
			Help: "Remote agent steps by result: ok, cancelled, or the failed step's code.",
		}, []string{"result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_remote_no_responders_total",
			Help: "Step requests no worker subscribed to (each is sent again until the unavailability window ends).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	if err := register(reg, &m.steps); err != nil {
		return nil, err
	}
	return m, register(reg, &m.retries)
}

// register registers *c, or takes the collector already registered under
// its name (a second Agent on one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(C); ok {
			*c = existing
			return nil
		}
	}
	return err
}

func (m *metrics) result(r string) { m.steps.WithLabelValues(r).Inc() }
