package brokermetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-broker/samsa/engine"
)

// Topics count the data path per topic, as Kafka's BrokerTopicMetrics do
// (kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T and the others):
//
//	samsa_topic_bytes_in_total{topic}               record-batch bytes appended by produce requests [BytesInPerSec]
//	samsa_topic_messages_in_total{topic}            records appended by produce requests [MessagesInPerSec]
//	samsa_topic_bytes_out_total{topic}              record bytes sent to consumers [BytesOutPerSec]
//	samsa_topic_replication_bytes_out_total{topic}  record bytes sent to follower replicas [ReplicationBytesOutPerSec]
//	samsa_topic_failed_produce_requests_total{topic,error}
//
// Idempotent retries answered from the producer state count no records (nothing is
// written) but their bytes, as Kafka's do. A deleted topic's series are dropped by
// the cluster collector's image walk (RegisterCluster). Safe for concurrent use; a
// nil *Topics counts nothing.
type Topics struct {
	bytesIn, msgsIn, bytesOut, replOut *prometheus.CounterVec
	failedProduce                      *prometheus.CounterVec // topic, error
	byTopic                            sync.Map               // topic -> *topicCounters
}

type topicCounters struct {
	bytesIn, msgsIn, bytesOut, replOut prometheus.Counter
}

// NewTopics builds the per-topic collectors, registered with reg (nil: not
// registered).
func NewTopics(reg prometheus.Registerer) *Topics {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "topic", Name: name, Help: help}, []string{"topic"})
	}
	t := &Topics{
		bytesIn:  c("bytes_in_total", "Record-batch bytes appended by produce requests, per topic [BrokerTopicMetrics BytesInPerSec]."),
		msgsIn:   c("messages_in_total", "Records appended by produce requests, per topic [BrokerTopicMetrics MessagesInPerSec]."),
		bytesOut: c("bytes_out_total", "Record bytes sent in fetch responses to consumers, per topic [BrokerTopicMetrics BytesOutPerSec]."),
		replOut:  c("replication_bytes_out_total", "Record bytes sent in fetch responses to follower replicas, per topic [BrokerTopicMetrics ReplicationBytesOutPerSec]."),
		failedProduce: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "samsa", Subsystem: "topic", Name: "failed_produce_requests_total",
			Help: "Produce appends the partition log refused, per topic and Kafka error [BrokerTopicMetrics FailedProduceRequestsPerSec]."}, []string{"topic", "error"}),
	}
	if reg != nil {
		reg.MustRegister(t.bytesIn, t.msgsIn, t.bytesOut, t.replOut, t.failedProduce)
	}
	return t
}

func (t *Topics) counters(topic string) *topicCounters {
	if c, ok := t.byTopic.Load(topic); ok {
		return c.(*topicCounters)
	}
	c := &topicCounters{
		bytesIn: t.bytesIn.WithLabelValues(topic), msgsIn: t.msgsIn.WithLabelValues(topic),
		bytesOut: t.bytesOut.WithLabelValues(topic), replOut: t.replOut.WithLabelValues(topic),
	}
	got, _ := t.byTopic.LoadOrStore(topic, c)
	return got.(*topicCounters)
}

// forget drops the series of the topics keep does not report.
func (t *Topics) forget(keep func(topic string) bool) {
	t.byTopic.Range(func(k, _ any) bool {
		topic := k.(string)
		if !keep(topic) {
			t.byTopic.Delete(topic)
			for _, v := range []*prometheus.CounterVec{t.bytesIn, t.msgsIn, t.bytesOut, t.replOut} {
				v.DeleteLabelValues(topic)
			}
			t.failedProduce.DeletePartialMatch(prometheus.Labels{"topic": topic})
		}
		return true
	})
}

// Produced counts a produce request's append of n bytes to topic (res its result).
func (t *Topics) Produced(topic string, n int, res engine.AppendResult) {
	if t == nil {
		return
	}
	c := t.counters(topic)
	c.bytesIn.Add(float64(n))
	if !res.Duplicate && res.LastOffset >= res.BaseOffset {
		c.msgsIn.Add(float64(res.LastOffset - res.BaseOffset + 1))
	}
}

// ProduceFailed counts an append to topic the log refused with ke.
func (t *Topics) ProduceFailed(topic string, ke *kerr.Error) {
	if t == nil || ke == nil {
		return
	}
	t.failedProduce.WithLabelValues(topic, ke.Message).Inc()
}

// Fetched counts n record bytes of topic sent in a fetch response, to a follower
// replica or a consumer.
func (t *Topics) Fetched(topic string, replica bool, n int64) {
	if t == nil || n <= 0 {
		return
	}
	c := t.counters(topic)
	if replica {
		c.replOut.Add(float64(n))
	} else {
		c.bytesOut.Add(float64(n))
	}
}
