package kafka

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestListenerGauge: a connection is counted under the name of the listener bound at
// its local address, by address or, for a wildcard listener, by port; an address no
// listener names is its own label.
func TestListenerGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := &Broker{cfg: Config{Derived: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092, INTERNAL://0.0.0.0:9094,CONTROLLER://127.0.0.1:9093"}}, metrics: newMetrics(reg, nil)}
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
