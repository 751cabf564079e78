package kafka

import (
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
	topics    *brokermetrics.Topics  // per topic (Kafka's BrokerTopicStats)
	listeners *request.ListenerConns // open connections per listener name
}

// newMetrics builds the broker listener's collectors (samsa_*), with the per-listener
// ones of the bound listeners (NAME://host:port,...), beside the per-topic ones the
// node registered (topics).
func newMetrics(reg prometheus.Registerer, listeners string, topics *brokermetrics.Topics) *metrics {
	m := newTableMetrics(reg, "", brokerAPIs)
	m.topics = topics
	m.listeners = request.NewListenerConns(reg, listeners)
	return m
}

// countFetched counts the record bytes of p in op's answer under p's topic (the
// log's: from v13 a fetch names topics by id). An op framed without a broker, as the
// framing tests do, counts nothing.
func (op *fetchOp) countFetched(p *fetchPart) {
	if op.b == nil || op.b.metrics == nil || p.log == nil {
		return
	}
	op.b.metrics.topics.Fetched(p.log.TopicPartition().Topic, op.replica, int64(p.slice.Size)+int64(p.remote.Len()))
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
	if g := b.metrics.listeners.Gauge(c.LocalAddr()); g != nil {
		g.Inc()
	}
}

// ConnClosed implements transport.ConnObserver.
func (b *Broker) ConnClosed(c transport.Conn) {
	b.shares.connClosed(c)
	b.metrics.Connections.Dec()
	if g := b.metrics.listeners.Gauge(c.LocalAddr()); g != nil {
		g.Dec()
	}
}
