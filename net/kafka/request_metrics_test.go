package kafka

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Answers' error codes are counted per API and code, and each request's time is split
// into queue, local and remote time as Kafka's RequestMetrics split it.
func TestRequestErrorsAndTimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startTestBroker(t, testBrokerOptions{Registerer: reg})
	cl := tb.client(t)
	ctx := testCtx(t)
	created := mustCreate(t, tb.admin(t), "timed", 1, nil)
	eventually(t, 10*time.Second, "timed-0 open", func() bool { return tb.log("timed", 0) != nil })

	// Metadata for two unknown topics, not created: two errors.
	md := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"absent-1", "absent-2"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, rt)
	}
	if _, err := md.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// A fetch of a partition the topic lacks (one error) and one that parks on the
	// empty partition until its MaxWait: its answer waits outside the handler.
	id := [16]byte(created.ID)
	fetch := func(partition int32, maxWait int32) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 13
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = partition, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	fetch(5, 0)
	fetch(0, 200)

	counts := map[[2]string]float64{}
	hist := map[string]*dto.Histogram{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "samsa_request_errors_total":
				counts[[2]string{labels["api"], labels["error"]}] = m.GetCounter().GetValue()
			case "samsa_request_queue_seconds", "samsa_request_local_seconds", "samsa_request_remote_seconds", "samsa_request_latency_seconds":
				if labels["api"] == "Fetch" {
					hist[mf.GetName()] = m.GetHistogram()
				}
			}
		}
	}
	if got := counts[[2]string{"Metadata", "UNKNOWN_TOPIC_OR_PARTITION"}]; got != 2 {
		t.Errorf("Metadata UNKNOWN_TOPIC_OR_PARTITION = %v, want 2 (%v)", got, counts)
	}
	if got := counts[[2]string{"Fetch", "UNKNOWN_TOPIC_OR_PARTITION"}]; got != 1 {
		t.Errorf("Fetch UNKNOWN_TOPIC_OR_PARTITION = %v, want 1 (%v)", got, counts)
	}
	for k := range counts {
		if k[1] == "NONE" {
			t.Errorf("NONE counted: %v", k)
		}
	}
	for _, name := range []string{"samsa_request_queue_seconds", "samsa_request_local_seconds", "samsa_request_remote_seconds", "samsa_request_latency_seconds"} {
		if h := hist[name]; h == nil || h.GetSampleCount() != 2 {
			t.Fatalf("%s{api=Fetch}: %v, want two samples", name, h)
		}
	}
	// The parked fetch waited its 200 ms outside the handler: remote time holds it,
	// and the parts add up to no more than the total.
	remote, total := hist["samsa_request_remote_seconds"].GetSampleSum(), hist["samsa_request_latency_seconds"].GetSampleSum()
	if remote < 0.1 {
		t.Errorf("remote time %.3fs, want the parked fetch's wait", remote)
	}
	if parts := remote + hist["samsa_request_local_seconds"].GetSampleSum() + hist["samsa_request_queue_seconds"].GetSampleSum(); parts > total*1.0001 {
		t.Errorf("queue+local+remote %.6fs > total %.6fs", parts, total)
	}
}
