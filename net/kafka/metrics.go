package kafka

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/transport"
)

// metrics are a listener's Prometheus collectors. Per-API collectors are resolved once
// at construction so the request path does no label lookups.
type metrics struct {
	bytesIn, bytesOut prometheus.Counter
	rejected          prometheus.Counter
	connections       prometheus.Gauge
	accepted          prometheus.Counter
	api               [maxAPIKey + 1]apiMetrics
	private           map[int16]apiMetrics // keys above maxAPIKey
	none              apiMetrics           // for a key outside the table (never served)
}

type apiMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

func (m *metrics) lookup(key int16) *apiMetrics {
	if key >= 0 && key <= maxAPIKey {
		if a := &m.api[key]; a.requests != nil {
			return a
		}
	} else if a, ok := m.private[key]; ok {
		return &a
	}
	return &m.none
}

func (m *metrics) requests(key int16) prometheus.Counter { return m.lookup(key).requests }
func (m *metrics) latency(key int16) prometheus.Observer { return m.lookup(key).latency }

// newMetrics builds the broker listener's collectors (samsa_*).
func newMetrics(reg prometheus.Registerer) *metrics { return newTableMetrics(reg, "", brokerAPIs) }

// newTableMetrics builds the collectors of a listener serving table t, named
// samsa_<subsystem>_* (the broker listener's have no subsystem).
func newTableMetrics(reg prometheus.Registerer, subsystem string, t *apiTable) *metrics {
	ns := "samsa"
	m := &metrics{
		bytesIn:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "bytes_in_total", Help: "Request bytes read, size prefixes included."}),
		bytesOut:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "bytes_out_total", Help: "Response bytes queued for writing, size prefixes included."}),
		rejected:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "requests_rejected_total", Help: "Requests whose connection was closed: unknown key, unsupported version, malformed."}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: subsystem, Name: "connections", Help: "Open client connections."}),
		accepted:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "connections_accepted_total", Help: "Client connections accepted."}),
		private:     map[int16]apiMetrics{},
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "requests_total", Help: "Requests decoded and handed to a handler, per API."}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: subsystem, Name: "request_latency_seconds", Help: "Time from a request's last byte read to its answer, per API.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. ~6.5s
	}, []string{"api"})
	for _, a := range t.served() {
		name := apiName(a.Key)
		am := apiMetrics{requests: requests.WithLabelValues(name), latency: latency.WithLabelValues(name)}
		if a.Key <= maxAPIKey {
			m.api[a.Key] = am
		} else {
			m.private[a.Key] = am
		}
	}
	m.none = apiMetrics{requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"}), latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "unused"})}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bytesIn, m.bytesOut, m.rejected, m.connections, m.accepted, requests, latency} {
			reg.MustRegister(c)
		}
	}
	return m
}

// ConnOpened implements transport.ConnObserver.
func (b *Broker) ConnOpened(transport.Conn) {
	b.metrics.connections.Inc()
	b.metrics.accepted.Inc()
}

// ConnClosed implements transport.ConnObserver.
func (b *Broker) ConnClosed(transport.Conn) { b.metrics.connections.Dec() }
