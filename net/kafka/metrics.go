package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/transport"
)

// metrics are the broker's Prometheus collectors. Per-API collectors are resolved once
// at construction so the request path does no label lookups.
type metrics struct {
	bytesIn, bytesOut prometheus.Counter
	rejected          prometheus.Counter
	connections       prometheus.Gauge
	accepted          prometheus.Counter
	api               [maxAPIKey + 1]struct {
		requests prometheus.Counter
		latency  prometheus.Observer
	}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		bytesIn:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: "samsa", Name: "bytes_in_total", Help: "Request bytes read, size prefixes included."}),
		bytesOut:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "samsa", Name: "bytes_out_total", Help: "Response bytes queued for writing, size prefixes included."}),
		rejected:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "samsa", Name: "requests_rejected_total", Help: "Requests whose connection was closed: unknown key, unsupported version, malformed."}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "samsa", Name: "connections", Help: "Open client connections."}),
		accepted:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "samsa", Name: "connections_accepted_total", Help: "Client connections accepted."}),
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Name: "requests_total", Help: "Requests decoded and handed to a handler, per API."}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "samsa", Name: "request_latency_seconds", Help: "Time from a request's last byte read to its answer, per API.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. ~6.5s
	}, []string{"api"})
	for _, a := range servedAPIs() {
		name := kmsg.NameForKey(a.Key)
		m.api[a.Key].requests = requests.WithLabelValues(name)
		m.api[a.Key].latency = latency.WithLabelValues(name)
	}
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
