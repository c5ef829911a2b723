package remote

import "github.com/prometheus/client_golang/prometheus"

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
	for _, c := range []prometheus.Collector{m.steps, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) result(r string) { m.steps.WithLabelValues(r).Inc() }
