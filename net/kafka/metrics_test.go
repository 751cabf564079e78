package kafka

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
)

// TestListenerGauge: a connection is counted under the name of the listener bound at
// its local address, by address or, for a wildcard listener, by port; an address no
// listener names is its own label.
func TestListenerGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := &Broker{cfg: Config{Derived: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092, INTERNAL://0.0.0.0:9094,CONTROLLER://127.0.0.1:9093"}}, metrics: newMetrics(reg)}
	for _, a := range []string{"127.0.0.1:9092", "127.0.0.1:9092", "10.0.0.5:9094", "127.0.0.1:7777"} {
		tcp, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		b.listenerGauge(tcp).Inc()
	}
	for name, want := range map[string]float64{"PLAINTEXT": 2, "INTERNAL": 1, "127.0.0.1:7777": 1, "CONTROLLER": 0} {
		if got := metricValue(t, b.metrics.listenerConns.WithLabelValues(name)); got != want {
			t.Errorf("listener %s: %v connections, want %v", name, got, want)
		}
	}
	if b.listenerGauge(nil) != nil {
		t.Error("a connection without a local address got a gauge")
	}
}

// TestTopicMetrics: produced and fetched count per topic (a duplicate counts its
// bytes, no records), follower fetches apart; forget drops a topic's series.
func TestTopicMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.produced("a", 100, engine.AppendResult{BaseOffset: 10, LastOffset: 14})
	m.produced("a", 100, engine.AppendResult{BaseOffset: 10, LastOffset: 14, Duplicate: true})
	m.produced("b", 7, engine.AppendResult{BaseOffset: 0, LastOffset: 0})
	m.fetched("a", false, 50)
	m.fetched("a", true, 30)
	m.fetched("a", false, 0)
	tm := m.topics
	for _, c := range []struct {
		v     *prometheus.CounterVec
		topic string
		want  float64
	}{{tm.bytesIn, "a", 200}, {tm.msgsIn, "a", 5}, {tm.bytesIn, "b", 7}, {tm.msgsIn, "b", 1}, {tm.bytesOut, "a", 50}, {tm.replOut, "a", 30}} {
		if got := metricValue(t, c.v.WithLabelValues(c.topic)); got != c.want {
			t.Errorf("%s: %v, want %v", c.topic, got, c.want)
		}
	}
	m.produceFailed("a", kerr.KafkaStorageError)
	m.produceFailed("a", kerr.KafkaStorageError)
	if got := metricValue(t, tm.failedProduce.WithLabelValues("a", "KAFKA_STORAGE_ERROR")); got != 2 {
		t.Errorf("failed produces: %v, want 2", got)
	}
	tm.forget(func(topic string) bool { return topic == "b" })
	ch := make(chan prometheus.Metric, 10)
	tm.bytesIn.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Errorf("after a's deletion, %d bytes-in series, want 1 (b)", n)
	}
	fch := make(chan prometheus.Metric, 10)
	tm.failedProduce.Collect(fch)
	close(fch)
	if len(fch) != 0 {
		t.Errorf("after a's deletion, %d failed-produce series, want none", len(fch))
	}
	if _, ok := tm.byTopic.Load("a"); ok {
		t.Error("a is still cached")
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
