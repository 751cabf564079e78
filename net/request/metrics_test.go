package request

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reflective error count of a successful one-partition Produce answer, the hot
// path's case.
func BenchmarkCountErrorsProduce(b *testing.B) {
	m := NewMetrics(nil, "", []int16{0}, func(int16) string { return "Produce" })
	a := m.lookup(0)
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
	resp.Topics = append(resp.Topics, rt)
	b.ReportAllocs()
	for b.Loop() {
		a.countErrors(resp)
	}
}
