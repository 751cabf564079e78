package kafka

import (
	"net"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsa-broker/samsa/net/brokermetrics"
	"github.com/samsa-broker/samsa/net/request"
	"github.com/samsa-broker/samsa/net/transport"
)

// metrics are a listener's collectors: the request metrics (net/request) and, on the
// broker listener, the per-topic and per-listener ones.
type metrics struct {
	*request.Metrics

	// The broker listener's only (nil on the controller listener's).
	topics        *brokermetrics.Topics // per topic (Kafka's BrokerTopicStats)
	listenerConns *prometheus.GaugeVec  // open connections per listener name
	listenerNames sync.Map              // local address -> *prometheus.Gauge child, resolved on first connection
}

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
	return &metrics{Metrics: request.NewMetrics(reg, subsystem, t.keys(), apiName)}
}

// ConnOpened implements transport.ConnObserver.
func (b *Broker) ConnOpened(c transport.Conn) {
	b.metrics.Connections.Inc()
	b.metrics.Accepted.Inc()
	if g := b.listenerGauge(c.LocalAddr()); g != nil {
		g.Inc()
	}
}

// ConnClosed implements transport.ConnObserver.
func (b *Broker) ConnClosed(c transport.Conn) {
	b.shares.connClosed(c)
	b.metrics.Connections.Dec()
	if g := b.listenerGauge(c.LocalAddr()); g != nil {
		g.Dec()
	}
}
