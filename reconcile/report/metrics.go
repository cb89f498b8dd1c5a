package report

import (
	"sync"
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

	// series are each policy's children of the vectors above, looked up
	// once: a sync counts in a dozen of them, and a lookup by label values
	// hashes them every time. Forget drops a policy's.
	mu     sync.Mutex
	series map[string]*policySeries
	phases sync.Map // phase name → prometheus.Observer
}

// policySeries are one policy's children of the vectors counted at every
// sync; the others are made at their first use, as WithLabelValues would.
type policySeries struct {
	policy            string
	duration          prometheus.Observer
	evaluated, reused prometheus.Counter
	mu                sync.Mutex
	lazy              map[lazySeries]prometheus.Collector
}

// lazySeries names a child made at its first use: its vector and its
// second label value, if any.
type lazySeries struct {
	vec   prometheus.Collector
	label string
}

// child returns the child of vec for the policy and label, made at its
// first use.
func (p *policySeries) child(vec interface {
	prometheus.Collector
	GetMetricWithLabelValues(...string) (prometheus.Metric, error)
}, label ...string) prometheus.Metric {
	k := lazySeries{vec: vec}
	if len(label) > 0 {
		k.label = label[0]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.lazy[k]; ok {
		return c.(prometheus.Metric)
	}
	c, err := vec.GetMetricWithLabelValues(append([]string{p.policy}, label...)...)
	if err != nil {
		panic(err) // the label counts are this file's
	}
	p.lazy[k] = c.(prometheus.Collector)
	return c
}

// of returns policy's series, made at its first sync.
func (m *Metrics) of(policy string) *policySeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.series[policy]; ok {
		return p
	}
	p := &policySeries{policy: policy, duration: m.syncDuration.WithLabelValues(policy),
		evaluated: m.evaluations.WithLabelValues(policy, "evaluated"), reused: m.evaluations.WithLabelValues(policy, "reused"),
		lazy: map[lazySeries]prometheus.Collector{}}
	m.series[policy] = p
	return p
}

// CountSync counts a sync of policy that got past its snapshot, full or
// incremental.
func (m *Metrics) CountSync(policy string, incremental bool) {
	mode := "full"
	if incremental {
		mode = "incremental"
	}
	m.of(policy).child(counterVec{m.Syncs}, mode).(prometheus.Counter).Inc()
}

// SetSettled sets how many desired objects policy's kept evaluations hold
// settled.
func (m *Metrics) SetSettled(policy string, n int) {
	m.of(policy).child(gaugeVec{m.Settled}).(prometheus.Gauge).Set(float64(n))
}

// counterVec and gaugeVec give the vectors one method to make a child by.
type counterVec struct{ *prometheus.CounterVec }

func (v counterVec) GetMetricWithLabelValues(lvs ...string) (prometheus.Metric, error) {
	return v.CounterVec.GetMetricWithLabelValues(lvs...)
}

type gaugeVec struct{ *prometheus.GaugeVec }

func (v gaugeVec) GetMetricWithLabelValues(lvs ...string) (prometheus.Metric, error) {
	return v.GaugeVec.GetMetricWithLabelValues(lvs...)
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
		Queue:  newQueueMetrics(),
		series: map[string]*policySeries{},

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
	p := m.of(policy)
	p.evaluated.Add(float64(evaluated))
	p.reused.Add(float64(reused))
}

// ObserveSync counts one sync of a policy: its duration, the reason of
// its failure (none: ""), what it did to each object and how many
// evaluations failed.
func (m *Metrics) ObserveSync(policy string, seconds float64, reason string, changes inventory.ChangeSet, evalErr error) {
	p := m.of(policy)
	p.duration.Observe(seconds)
	if reason != "" {
		p.child(counterVec{m.syncErrors}, reason).(prometheus.Counter).Inc()
	}
	// Consecutive changes of one action are added at once.
	for i := 0; i < len(changes.Changes); {
		action, n := changes.Changes[i].Action, 0
		for ; i < len(changes.Changes) && changes.Changes[i].Action == action; i++ {
			n++
		}
		p.child(counterVec{m.objects}, string(action)).(prometheus.Counter).Add(float64(n))
	}
	if evalErr != nil {
		n := 1
		if joined, ok := evalErr.(interface{ Unwrap() []error }); ok {
			n = len(joined.Unwrap())
		}
		p.child(counterVec{m.evaluationErrors}).(prometheus.Counter).Add(float64(n))
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
		o, ok := p.m.phases.Load(name)
		if !ok {
			o, _ = p.m.phases.LoadOrStore(name, p.m.phaseDuration.WithLabelValues(name))
		}
		o.(prometheus.Observer).Observe(p.spent[name].Seconds())
	}
}

// Forget drops the series of a policy that is gone.
func (m *Metrics) Forget(policy string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.series, policy)
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
