package kafka

import (
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/brokermetrics"
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

	// The broker listener's only (nil on the controller listener's).
	topics        *brokermetrics.Topics // per topic (Kafka's BrokerTopicStats)
	listenerConns *prometheus.GaugeVec  // open connections per listener name
	listenerNames sync.Map              // local address -> *prometheus.Gauge child, resolved on first connection
}

type apiMetrics struct {
	requests             prometheus.Counter
	latency              prometheus.Observer
	queue, local, remote prometheus.Observer
	name                 string
	errors               *prometheus.CounterVec // api, error (shared by the table)
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

// newMetrics builds the broker listener's collectors (samsa_*), with the per-listener
// ones, beside the per-topic ones the node registered (topics).
func newMetrics(reg prometheus.Registerer, topics *brokermetrics.Topics) *metrics {
	m := newTableMetrics(reg, "", brokerAPIs)
	m.topics = topics
	m.listenerConns = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "samsa", Name: "listener_connections",
		Help: "Open client connections per broker listener (its name in listeners) [SocketServer connection-count]."}, []string{"listener"})
	if reg != nil {
		reg.MustRegister(m.listenerConns)
	}
	return m
}

// countFetched counts the record bytes of p in op's answer under p's topic (the
// log's: from v13 a fetch names topics by id). An op framed without a broker, as the
// framing tests do, counts nothing.
func (op *fetchOp) countFetched(p *fetchPart) {
	if op.b == nil || op.b.metrics == nil || p.log == nil {
		return
	}
	op.b.metrics.topics.Fetched(p.log.TopicPartition().Topic, op.replica, int64(p.slice.Size))
}

// listenerGauge is the connection gauge of the listener bound at addr, named from the
// broker's bound listeners (Config.Derived["listeners"], NAME://host:port, as the
// node wiring fills it); a listener it cannot name is labelled by its address.
func (b *Broker) listenerGauge(addr net.Addr) prometheus.Gauge {
	m := b.metrics
	if m.listenerConns == nil || addr == nil {
		return nil
	}
	key := addr.String()
	if g, ok := m.listenerNames.Load(key); ok {
		return g.(prometheus.Gauge)
	}
	name := key
	_, port, _ := net.SplitHostPort(key)
	for _, l := range strings.Split(b.cfg.Derived["listeners"], ",") {
		n, hp, ok := strings.Cut(strings.TrimSpace(l), "://")
		if !ok {
			continue
		}
		h, p, err := net.SplitHostPort(hp)
		if hp == key || err == nil && p == port && (h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified()) {
			name = n
			break
		}
	}
	g, _ := m.listenerNames.LoadOrStore(key, m.listenerConns.WithLabelValues(name))
	return g.(prometheus.Gauge)
}

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
	buckets := prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs .. ~6.5s
	hist := func(name, help string) *prometheus.HistogramVec {
		// Classic buckets for every scraper, and a native (sparse, exponential)
		// histogram beside them for a Prometheus that scrapes protobuf with
		// native histograms on: buckets 10% apart, at most 160 per series.
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets,
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour}, []string{"api"})
	}
	latency := hist("request_latency_seconds", "Time from a request's last byte read to its answer, per API [RequestMetrics TotalTimeMs].")
	queue := hist("request_queue_seconds", "Time from a request's last byte read to its handler's start, per API [RequestMetrics RequestQueueTimeMs].")
	local := hist("request_local_seconds", "Time the request's handler ran, per API [RequestMetrics LocalTimeMs].")
	remote := hist("request_remote_seconds", "Time an answer waited after its handler returned (replicas, new data, the controller, a coordinator), per API [RequestMetrics RemoteTimeMs].")
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "request_errors_total",
		Help: "Error codes in answers, per API and code, one per partition, group or resource that carries one; NONE is not counted [RequestMetrics ErrorsPerSec]."}, []string{"api", "error"})
	for _, a := range t.served() {
		name := apiName(a.Key)
		am := apiMetrics{requests: requests.WithLabelValues(name), latency: latency.WithLabelValues(name),
			queue: queue.WithLabelValues(name), local: local.WithLabelValues(name), remote: remote.WithLabelValues(name),
			name: name, errors: errs}
		if a.Key <= maxAPIKey {
			m.api[a.Key] = am
		} else {
			m.private[a.Key] = am
		}
	}
	unused := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "unused"})
	m.none = apiMetrics{requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"}), latency: unused,
		queue: unused, local: unused, remote: unused, name: "unknown", errors: errs}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bytesIn, m.bytesOut, m.rejected, m.connections, m.accepted, requests, latency, queue, local, remote, errs} {
			reg.MustRegister(c)
		}
	}
	return m
}

// ConnOpened implements transport.ConnObserver.
func (b *Broker) ConnOpened(c transport.Conn) {
	b.metrics.connections.Inc()
	b.metrics.accepted.Inc()
	if g := b.listenerGauge(c.LocalAddr()); g != nil {
		g.Inc()
	}
}

// ConnClosed implements transport.ConnObserver.
func (b *Broker) ConnClosed(c transport.Conn) {
	b.shares.connClosed(c)
	b.metrics.connections.Dec()
	if g := b.listenerGauge(c.LocalAddr()); g != nil {
		g.Dec()
	}
}
