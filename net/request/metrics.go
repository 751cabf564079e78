package request

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/net/wire"
)

// maxDenseKey bounds the keys whose collectors sit in an array; Kafka's keys are small
// and dense, private keys (above it) are few.
const maxDenseKey = 127

// Metrics are a listener's request collectors (samsa_<subsystem>_*: Kafka's
// RequestMetrics and the SocketServer's byte and connection counts). Per-API
// collectors are resolved once at construction so the request path does no label
// lookups. Safe for concurrent use.
type Metrics struct {
	bytesIn, bytesOut prometheus.Counter
	rejected          prometheus.Counter
	// Connections and Accepted are the listener's to move (its ConnObserver).
	Connections prometheus.Gauge
	Accepted    prometheus.Counter
	api         [maxDenseKey + 1]apiMetrics
	private     map[int16]apiMetrics // keys above maxDenseKey
	none        apiMetrics           // for a key outside the table (never served)
}

type apiMetrics struct {
	requests             prometheus.Counter
	latency              prometheus.Observer
	queue, local, remote prometheus.Observer
	name                 string
	errors               *prometheus.CounterVec // api, error (shared by the table)
}

func (m *Metrics) lookup(key int16) *apiMetrics {
	if key >= 0 && key <= maxDenseKey {
		if a := &m.api[key]; a.requests != nil {
			return a
		}
	} else if a, ok := m.private[key]; ok {
		return &a
	}
	return &m.none
}

// Rejected counts a request whose connection was closed before it was parsed.
func (m *Metrics) Rejected() { m.rejected.Inc() }

// Requests is the count of requests of key handed to a handler.
func (m *Metrics) Requests(key int16) prometheus.Counter { return m.lookup(key).requests }

// Errors per API and code (samsa_request_errors_total), as Kafka's RequestMetrics
// ErrorsPerSec count them: every ErrorCode field of an answer, at any depth (top
// level, per topic, per partition, per group, per resource), counts once. Kafka
// counts NONE too; here it is left out, so that an idle series set stays small and
// the hot path does no label lookups for a successful answer. The fields are found
// by net/wire (ErrorCodes), by reflection once per response type; a type without any
// costs one map lookup per answer. An answer framed by hand counts its own
// (Request.CountError).

// countErrors adds resp's error codes to the API's series.
func (a *apiMetrics) countErrors(resp kmsg.Response) { wire.ErrorCodes(resp, a) }

// CountError adds one answer's code to the API's series (wire.ErrorSink); NONE is not
// counted.
func (a *apiMetrics) CountError(code int16) {
	if code == 0 {
		return
	}
	a.errors.WithLabelValues(a.name, wire.ErrorName(code)).Inc()
}

// NewMetrics builds the collectors of a listener serving keys (name gives each its
// label), named samsa_<subsystem>_* (the broker listener's have no subsystem), and
// registers them with reg (nil: none).
func NewMetrics(reg prometheus.Registerer, subsystem string, keys []int16, name func(key int16) string) *Metrics {
	ns := "samsa"
	m := &Metrics{
		bytesIn:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "bytes_in_total", Help: "Request bytes read, size prefixes included."}),
		bytesOut:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "bytes_out_total", Help: "Response bytes queued for writing, size prefixes included."}),
		rejected:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "requests_rejected_total", Help: "Requests whose connection was closed: unknown key, unsupported version, malformed."}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: subsystem, Name: "connections", Help: "Open client connections."}),
		Accepted:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: subsystem, Name: "connections_accepted_total", Help: "Client connections accepted."}),
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
	for _, key := range keys {
		n := name(key)
		am := apiMetrics{requests: requests.WithLabelValues(n), latency: latency.WithLabelValues(n),
			queue: queue.WithLabelValues(n), local: local.WithLabelValues(n), remote: remote.WithLabelValues(n),
			name: n, errors: errs}
		if key >= 0 && key <= maxDenseKey {
			m.api[key] = am
		} else {
			m.private[key] = am
		}
	}
	unused := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "unused"})
	m.none = apiMetrics{requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"}), latency: unused,
		queue: unused, local: unused, remote: unused, name: "unknown", errors: errs}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bytesIn, m.bytesOut, m.rejected, m.Connections, m.Accepted, requests, latency, queue, local, remote, errs} {
			reg.MustRegister(c)
		}
	}
	return m
}
