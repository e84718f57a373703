package nri

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The events the observer counts, the values of the event label of
// podsapi_nri_events_total.
const (
	eventSynchronize = iota
	eventRunPodSandbox
	eventStopPodSandbox
	eventRemovePodSandbox
	eventPostCreateContainer
	eventPostStartContainer
	eventRemoveContainer
	numEvents
)

var eventNames = [numEvents]string{
	"synchronize", "run_pod_sandbox", "stop_pod_sandbox", "remove_pod_sandbox",
	"post_create_container", "post_start_container", "remove_container",
}

// The reasons facts are refused, the values of the reason label of
// podsapi_nri_facts_refused_total.
const (
	reasonInvalid = iota
	reasonBound
	numReasons
)

var reasonNames = [numReasons]string{"invalid", "bound"}

// Metrics are the metrics of the observer. A nil *Metrics counts nothing.
type Metrics struct {
	connected   prometheus.Gauge
	connections prometheus.Counter
	events      [numEvents]prometheus.Counter
	refused     [numReasons]prometheus.Counter
	delay       prometheus.Histogram
	// last is when the last event came, in Unix nanoseconds (0: none).
	last atomic.Int64
}

// NewMetrics creates the metrics of the observer and registers them with
// reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "podsapi_nri_connected",
			Help: "1 when the server is connected to the container runtime's NRI socket (--nri-socket) and has taken its synchronisation, else 0.",
		}),
		connections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podsapi_nri_connections_total",
			Help: "Number of connections to the container runtime's NRI socket that were synchronised: the first, then one after each restart of the runtime.",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "podsapi_nri_report_delay_seconds",
			Help:    "Time from the container runtime's event of a container (NRI) to the pod source's first report of the container's ID: the window in which only NRI finds the container.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}),
	}
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsapi_nri_events_total",
		Help: "Number of NRI events taken from the container runtime, by event: synchronize, run_pod_sandbox, stop_pod_sandbox, remove_pod_sandbox, post_create_container, post_start_container, remove_container.",
	}, []string{"event"})
	for i, name := range eventNames {
		m.events[i] = events.WithLabelValues(name)
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsapi_nri_facts_refused_total",
		Help: "Number of pods and containers of NRI events not kept, by reason: invalid (an ID, name or UID missing, too long or not printable) or bound (over the 16 MiB the store keeps of the runtime's facts, or the memory budget).",
	}, []string{"reason"})
	for i, name := range reasonNames {
		m.refused[i] = refused.WithLabelValues(name)
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_nri_last_event_age_seconds",
		Help: "Seconds since the last NRI event from the container runtime; -1 before the first.",
	}, func() float64 {
		last := m.last.Load()
		if last == 0 {
			return -1
		}
		return time.Since(time.Unix(0, last)).Seconds()
	})
	reg.MustRegister(m.connected, m.connections, events, refused, m.delay, age)
	return m
}

// ObserveReport counts the time between the runtime's event of a container
// and the pod source's report of it. Give it to store.ObserveReports.
func (m *Metrics) ObserveReport(d time.Duration) {
	if m != nil {
		m.delay.Observe(d.Seconds())
	}
}

func (m *Metrics) event(e int) {
	if m != nil {
		m.events[e].Inc()
		m.last.Store(time.Now().UnixNano())
	}
}

func (m *Metrics) refuse(reason, n int) {
	if m != nil && n > 0 {
		m.refused[reason].Add(float64(n))
	}
}

func (m *Metrics) setConnected(on bool) {
	if m == nil {
		return
	}
	if on {
		m.connected.Set(1)
		m.connections.Inc()
	} else {
		m.connected.Set(0)
	}
}
