package brokermetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
)

// TestTopicMetrics: produced and fetched count per topic (a duplicate counts its
// bytes, no records), follower fetches apart; forget drops a topic's series; a nil
// Topics counts nothing.
func TestTopicMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tm := NewTopics(reg)
	tm.Produced("a", 100, engine.AppendResult{BaseOffset: 10, LastOffset: 14})
	tm.Produced("a", 100, engine.AppendResult{BaseOffset: 10, LastOffset: 14, Duplicate: true})
	tm.Produced("b", 7, engine.AppendResult{BaseOffset: 0, LastOffset: 0})
	tm.Fetched("a", false, 50)
	tm.Fetched("a", true, 30)
	tm.Fetched("a", false, 0)
	for _, c := range []struct {
		v     *prometheus.CounterVec
		topic string
		want  float64
	}{{tm.bytesIn, "a", 200}, {tm.msgsIn, "a", 5}, {tm.bytesIn, "b", 7}, {tm.msgsIn, "b", 1}, {tm.bytesOut, "a", 50}, {tm.replOut, "a", 30}} {
		if got := metricValue(t, c.v.WithLabelValues(c.topic)); got != c.want {
			t.Errorf("%s: %v, want %v", c.topic, got, c.want)
		}
	}
	tm.ProduceFailed("a", kerr.KafkaStorageError)
	tm.ProduceFailed("a", kerr.KafkaStorageError)
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
	var none *Topics
	none.Produced("a", 1, engine.AppendResult{})
	none.ProduceFailed("a", kerr.KafkaStorageError)
	none.Fetched("a", false, 1)
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
