package sourcemetrics

import "github.com/prometheus/client_golang/prometheus"

// Connection is the state of a source that holds a connection to a peer
// and lists again what it lost: whether it is connected, and how many times
// it relisted.
type Connection struct {
	connected prometheus.Gauge
	relists   prometheus.Counter
}

// NewConnection makes the connection metrics of the source named source,
// podsapi_source_connected and podsapi_source_relists_total, and registers
// them with reg unless reg is nil, reusing collectors reg holds already.
func NewConnection(reg prometheus.Registerer, source string) *Connection {
	connected := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "podsapi", Subsystem: "source", Name: "connected",
		Help: "1 when the pod source's last request to its peer succeeded, 0 when it failed.",
	}, []string{"source"}))
	relists := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "podsapi", Subsystem: "source", Name: "relists_total",
		Help: "Complete lists the pod source read after its first one (after a 410 Gone or an outage).",
	}, []string{"source"}))
	return &Connection{connected: connected.WithLabelValues(source), relists: relists.WithLabelValues(source)}
}

// SetConnected records whether the source's last request succeeded.
func (c *Connection) SetConnected(ok bool) {
	if ok {
		c.connected.Set(1)
	} else {
		c.connected.Set(0)
	}
}

// CountRelist counts one relist.
func (c *Connection) CountRelist() { c.relists.Inc() }
