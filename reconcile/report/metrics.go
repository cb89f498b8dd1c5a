package report

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/sprout-gitops/sprout/inventory"
)

// Metrics are the Prometheus series of one reconcile.Controller. docs/metrics.md
// lists them; they are registered on Options.Metrics.
type Metrics struct {
	syncDuration     *prometheus.HistogramVec
	phaseDuration    *prometheus.HistogramVec
	syncErrors       *prometheus.CounterVec
	objects          *prometheus.CounterVec
	evaluationErrors *prometheus.CounterVec
	evaluations      *prometheus.CounterVec
	Settled          *prometheus.GaugeVec
	Syncs            *prometheus.CounterVec

	Queue QueueMetrics

	SourceChecks    *prometheus.CounterVec
	SourceLastCheck *prometheus.GaugeVec
	SourceReady     *prometheus.GaugeVec
	SourcePolicies  *prometheus.GaugeVec
	SourceRevision  *prometheus.GaugeVec
}

// NewMetrics makes the series, registered on reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sprout_reconcile_duration_seconds",
			Help:    "How long one sync of a policy took: match, evaluate, apply, prune, record.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"policy"}),
		phaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sprout_reconcile_phase_duration_seconds",
			Help:    "How long each phase of a sync took, over every policy: match, evaluate, record (written before apply), apply, prune, report (status and counts).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"phase"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_reconcile_errors_total",
			Help: "Syncs of a policy that ended with an error, by the reason on its Ready condition.",
		}, []string{"policy", "reason"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_objects_total",
			Help: "Generated objects handled by syncs, by action: created, configured, unchanged, deleted, skipped, failed.",
		}, []string{"policy", "action"}),
		evaluationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_evaluation_errors_total",
			Help: "Evaluations of a policy for one trigger that failed.",
		}, []string{"policy"}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_evaluations_total",
			Help: "Evaluations of a policy for one trigger, by result: evaluated, or reused (kept from an earlier sync for the same trigger, Namespace and policy versions).",
		}, []string{"policy", "result"}),
		Settled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_settled_objects",
			Help: "Desired objects of a policy that its kept evaluations hold settled, after its last sync: as their identity and version, without a copy of their own.",
		}, []string{"policy"}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_syncs_total",
			Help: "Syncs of a policy that got past its snapshot, by mode: full (every trigger), or incremental (only the triggers changed since the last).",
		}, []string{"policy", "mode"}),
		Queue: newQueueMetrics(),

		SourceChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sprout_source_checks_total",
			Help: "Checks of polled policy sources, by result: taken (a new revision), unchanged, failed (unreachable or rejected).",
		}, []string{"source", "result"}),
		SourceLastCheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_last_check_timestamp_seconds",
			Help: "When a polled policy source was last checked, in Unix seconds.",
		}, []string{"source"}),
		SourceReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_ready",
			Help: "1 when the source's last check succeeded, 0 while it fails (its last good revision keeps running).",
		}, []string{"source"}),
		SourcePolicies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_policies",
			Help: "Policies the source delivers, running or shadowed by a source of higher precedence.",
		}, []string{"source"}),
		SourceRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sprout_source_revision_info",
			Help: "The revision whose policies run, as a label; the value is always 1.",
		}, []string{"source", "revision"}),
	}
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{m.syncDuration, m.phaseDuration, m.syncErrors, m.objects, m.evaluationErrors, m.evaluations, m.Settled, m.Syncs,
		m.SourceChecks, m.SourceLastCheck, m.SourceReady, m.SourcePolicies, m.SourceRevision}
	for _, c := range append(collectors, m.Queue.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// InformerSize is what one running informer's cache holds.
type InformerSize struct {
	Kind, Resource, Selector string
	Objects                  int
}

// RegisterInformerGauges counts the running informers of each kind
// ("trigger", "generated"), and the objects each one's cache holds, when
// scraped: running counts them, sizes lists them.
func RegisterInformerGauges(reg prometheus.Registerer, running func(kind string) int, sizes func() []InformerSize) error {
	for _, kind := range []string{"trigger", "generated"} {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sprout_informers",
			Help:        "Running informers: on trigger and clone-source resources, and label-selected ones on generated resources.",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(running(kind)) })
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return reg.Register(informerObjects{sizes: sizes, desc: prometheus.NewDesc("sprout_informer_objects",
		"Objects an informer's cache holds: a trigger informer holds those its label selector (a policy's objectSelector) selects.",
		[]string{"kind", "resource", "selector"}, nil)})
}

// informerObjects serves sprout_informer_objects, counted when scraped.
type informerObjects struct {
	sizes func() []InformerSize
	desc  *prometheus.Desc
}

func (g informerObjects) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g informerObjects) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.sizes() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(s.Objects), s.Kind, s.Resource, s.Selector)
	}
}

// ObserveEvaluations counts one sync's evaluations.
func (m *Metrics) ObserveEvaluations(policy string, evaluated, reused int) {
	m.evaluations.WithLabelValues(policy, "evaluated").Add(float64(evaluated))
	m.evaluations.WithLabelValues(policy, "reused").Add(float64(reused))
}

// ObserveSync counts one sync of a policy: its duration, the reason of
// its failure (none: ""), what it did to each object and how many
// evaluations failed.
func (m *Metrics) ObserveSync(policy string, seconds float64, reason string, changes inventory.ChangeSet, evalErr error) {
	m.syncDuration.WithLabelValues(policy).Observe(seconds)
	if reason != "" {
		m.syncErrors.WithLabelValues(policy, reason).Inc()
	}
	counts := map[inventory.Action]int{}
	for _, ch := range changes.Changes {
		counts[ch.Action]++
	}
	for action, n := range counts {
		m.objects.WithLabelValues(policy, string(action)).Add(float64(n))
	}
	if evalErr != nil {
		n := 1
		if joined, ok := evalErr.(interface{ Unwrap() []error }); ok {
			n = len(joined.Unwrap())
		}
		m.evaluationErrors.WithLabelValues(policy).Add(float64(n))
	}
}

// Phases times the phases of one sync, one after the other. A phase may
// come back, once per part of the triggers: its times add up.
type Phases struct {
	m     *Metrics
	last  time.Time
	names []string
	spent map[string]time.Duration
}

// Phases starts timing a sync's phases.
func (m *Metrics) Phases() *Phases {
	return &Phases{m: m, last: time.Now(), spent: map[string]time.Duration{}}
}

// Done ends the current phase, named, and starts the next.
func (p *Phases) Done(phase string) {
	now := time.Now()
	if _, ok := p.spent[phase]; !ok {
		p.names = append(p.names, phase)
	}
	p.spent[phase] += now.Sub(p.last)
	p.last = now
}

// Observe records the time each phase took.
func (p *Phases) Observe() {
	for _, name := range p.names {
		p.m.phaseDuration.WithLabelValues(name).Observe(p.spent[name].Seconds())
	}
}

// Forget drops the series of a policy that is gone.
func (m *Metrics) Forget(policy string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.syncDuration, m.syncErrors, m.objects, m.evaluationErrors, m.evaluations, m.Settled, m.Syncs} {
		v.DeletePartialMatch(prometheus.Labels{"policy": policy})
	}
}

// QueueMetrics serve client-go's work-queue metrics as sprout_workqueue_*,
// labelled by queue name ("policies", "sources").
type QueueMetrics struct {
	depth, longest, unfinished *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = QueueMetrics{}

func newQueueMetrics() QueueMetrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sprout_workqueue_" + name, Help: help}, []string{"name"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sprout_workqueue_" + name, Help: help}, []string{"name"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sprout_workqueue_" + name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"name"})
	}
	return QueueMetrics{
		depth:      gauge("depth", "Keys waiting in the queue."),
		longest:    gauge("longest_running_processor_seconds", "How long the longest running sync has been running."),
		unfinished: gauge("unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration."),
		adds:       counter("adds_total", "Keys added to the queue."),
		retries:    counter("retries_total", "Keys queued again after an error, with back-off."),
		latency:    histogram("queue_duration_seconds", "How long a key waited in the queue before a worker took it."),
		work:       histogram("work_duration_seconds", "How long a worker took to process a key."),
	}
}

func (q QueueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.depth, q.longest, q.unfinished, q.adds, q.retries, q.latency, q.work}
}

func (q QueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}
func (q QueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q QueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q QueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}
func (q QueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q QueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}
func (q QueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
