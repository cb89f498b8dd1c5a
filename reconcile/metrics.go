package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus series of one Controller. docs/metrics.md
// lists them; they are registered on Options.Metrics.
type metrics struct {
	sourceChecks    *prometheus.CounterVec
	sourceLastCheck *prometheus.GaugeVec
	sourceReady     *prometheus.GaugeVec
	sourcePolicies  *prometheus.GaugeVec
	sourceRevision  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sourceChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_source_checks_total",
			Help: "Checks of polled policy sources, by result: taken (a new revision), unchanged, failed (unreachable or rejected).",
		}, []string{"source", "result"}),
		sourceLastCheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_last_check_timestamp_seconds",
			Help: "When a polled policy source was last checked, in Unix seconds.",
		}, []string{"source"}),
		sourceReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_ready",
			Help: "1 when the source's last check succeeded, 0 while it fails (its last good revision keeps running).",
		}, []string{"source"}),
		sourcePolicies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_policies",
			Help: "Policies the source delivers, running or shadowed by a source of higher precedence.",
		}, []string{"source"}),
		sourceRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_revision_info",
			Help: "The revision whose policies run, as a label; the value is always 1.",
		}, []string{"source", "revision"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sourceChecks, m.sourceLastCheck, m.sourceReady, m.sourcePolicies, m.sourceRevision} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
