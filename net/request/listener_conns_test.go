package request

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestListenerConns: a connection is counted under the name of the listener bound at
// its local address, by address or, for a wildcard listener, by port; an address no
// listener names is its own label.
func TestListenerConns(t *testing.T) {
	reg := prometheus.NewRegistry()
	lc := NewListenerConns(reg, "PLAINTEXT://127.0.0.1:9092, INTERNAL://0.0.0.0:9094,CONTROLLER://127.0.0.1:9093")
	for _, a := range []string{"127.0.0.1:9092", "127.0.0.1:9092", "10.0.0.5:9094", "127.0.0.1:7777"} {
		tcp, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		lc.Gauge(tcp).Inc()
	}
	for name, want := range map[string]float64{"PLAINTEXT": 2, "INTERNAL": 1, "127.0.0.1:7777": 1, "CONTROLLER": 0} {
		var d dto.Metric
		if err := lc.vec.WithLabelValues(name).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.Gauge.GetValue(); got != want {
			t.Errorf("listener %s: %v connections, want %v", name, got, want)
		}
	}
	if lc.Gauge(nil) != nil {
		t.Error("a connection without a local address got a gauge")
	}
}
