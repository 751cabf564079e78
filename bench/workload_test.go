package bench

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBuiltinWorkloadsParse(t *testing.T) {
	want := []string{"backlog-drain", "fanout", "latency-100k", "latency-100k-1kb", "latency-20k", "many-producers", "max-throughput-100b", "omb-1topic-100p-1kb", "partitions-10k", "retention-reached", "steady-1h", "tiered-catchup", "tiered-readback"}
	have := map[string]bool{}
	for _, n := range BuiltinWorkloads() {
		have[n] = true
		w, err := LoadWorkload(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if w.Name != n {
			t.Errorf("%s: name %q", n, w.Name)
		}
	}
	for _, n := range want {
		if !have[n] {
			t.Errorf("built-in workload %s missing", n)
		}
	}
	w, _ := LoadWorkload("omb-1topic-100p-1kb")
	if w.PartitionsPerTopic != 100 || w.MessageSize != 1024 || w.Producers() != 4 || w.Consumers() != 4 || w.ProducerRate == 0 {
		t.Errorf("omb-1topic-100p-1kb: %+v", w)
	}
	w, _ = LoadWorkload("fanout")
	if w.SubscriptionsPerTopic != 8 || w.Producers() != 1 {
		t.Errorf("fanout: %+v", w)
	}
	w, _ = LoadWorkload("backlog-drain")
	if w.BacklogBytes() != 5<<30 {
		t.Errorf("backlog-drain: backlog %d", w.BacklogBytes())
	}
	w, _ = LoadWorkload("tiered-catchup")
	if !w.TieredCatchup() || w.BacklogBytes() != 5<<30 || w.TopicConfigs["local.retention.bytes"] == "" {
		t.Errorf("tiered-catchup: %+v", w)
	}
	w, _ = LoadWorkload("tiered-readback")
	lr, _ := strconv.ParseInt(w.TopicConfigs["local.retention.bytes"], 10, 64)
	if !w.TieredCatchup() || !w.ReadBack || w.BacklogBytes() < 10*lr*int64(w.PartitionsPerTopic) {
		t.Errorf("tiered-readback: not 10x its local retention: %+v", w)
	}
	// A read-back needs a tiered backlog, acknowledged by every replica.
	for _, bad := range []string{"topics: 1\nreadBack: true\n", "topics: 1\nconsumerBacklogSizeGB: 1\nreadBack: true\ntopicConfigs:\n  remote.storage.enable: \"true\"\n  local.retention.bytes: \"0\"\nproducer:\n  acks: 1\n"} {
		if _, err := ParseWorkload(strings.NewReader(bad)); !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), "readBack needs") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if w, _ = LoadWorkload("backlog-drain"); w.Tiered() || w.TieredCatchup() {
		t.Errorf("backlog-drain is tiered")
	}
	// A tiered catch-up needs a local retention to read past.
	bad := "topics: 1\nconsumerBacklogSizeGB: 1\ntopicConfigs:\n  remote.storage.enable: \"true\"\n"
	if _, err := ParseWorkload(strings.NewReader(bad)); !errors.Is(err, ErrWorkload) || !strings.Contains(err.Error(), "local.retention.bytes") {
		t.Errorf("a tiered backlog without local.retention.bytes: %v", err)
	}
	w, _ = LoadWorkload("latency-100k")
	if w.ProducerRate != 100000 || w.MessageSize != 100 || w.PartitionsPerTopic != 6 {
		t.Errorf("latency-100k: %+v", w)
	}
	// The hard workloads: omb-1topic-100p-1kb's load from 64 keyed producers, and the
	// same at the topic's retention.bytes.
	omb, _ := LoadWorkload("omb-1topic-100p-1kb")
	for _, n := range []string{"many-producers", "retention-reached"} {
		w, _ = LoadWorkload(n)
		if w.Producers() != 64 || w.PartitionsPerTopic != omb.PartitionsPerTopic || w.MessageSize != omb.MessageSize || w.ProducerRate != omb.ProducerRate ||
			w.KeyDistributor != KeyRandom || w.Consumers() != omb.Consumers() || w.Producer != (ProducerConfig{Acks: -1, Compression: "none", Linger: omb.Producer.Linger, BatchSize: omb.Producer.BatchSize, MaxInFlight: 5, MaxBufferedRecords: 5000}) {
			t.Errorf("%s: %+v", n, w)
		}
	}
	if w.TopicConfigs["retention.bytes"] != "2097152" || w.TopicConfigs["segment.bytes"] != "1048576" ||
		strings.Join(w.BrokerArgs(), " ") != "--set log.retention.check.interval.ms=1000" {
		t.Errorf("retention-reached: topic configs %v, broker args %v", w.TopicConfigs, w.BrokerArgs())
	}
	w, _ = LoadWorkload("latency-100k-1kb")
	if w.ProducerRate != 100000 || w.MessageSize != 1024 || w.PartitionsPerTopic != 6 {
		t.Errorf("latency-100k-1kb: %+v", w)
	}
}

func TestParseWorkloadFields(t *testing.T) {
	w, err := ParseWorkload(strings.NewReader(`
name: t
topics: 2
partitionsPerTopic: 3
messageSize: 64
keyDistributor: KEY_ROUND_ROBIN
producerRate: 1000
testDurationMinutes: 0.5
warmupDurationMinutes: 0.25
producer:
  acks: 1
  compression: zstd
  linger: 2ms
  maxInFlight: 3
consumer:
  mode: assign
  fetchMaxWait: 0.1
`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Duration.D() != 30*time.Second || w.Warmup.D() != 15*time.Second {
		t.Errorf("durations %v %v", w.Duration.D(), w.Warmup.D())
	}
	if w.Producer.Acks != 1 || w.Producer.Compression != "zstd" || w.Producer.Linger.D() != 2*time.Millisecond || w.Producer.MaxInFlight != 3 {
		t.Errorf("producer %+v", w.Producer)
	}
	if w.KeyDistributor != KeyRoundRobin || w.Consumer.Mode != "assign" || w.Consumer.FetchMaxWait.D() != 100*time.Millisecond {
		t.Errorf("keys %q mode %q wait %v", w.KeyDistributor, w.Consumer.Mode, w.Consumer.FetchMaxWait.D())
	}
	if w.Producers() != 2 || w.Consumers() != 2 {
		t.Errorf("clients %d %d", w.Producers(), w.Consumers())
	}
}

func TestParseWorkloadRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"unknown key", "name: x\nmesageSize: 100\n"},
		{"tiny message", "messageSize: 8\n"},
		{"huge message", "messageSize: 1000000000\n"},
		{"bad acks", "producer: {acks: 2}\n"},
		{"bad key dist", "keyDistributor: sometimes\n"},
		{"zipf exponent", "keyDistributor: zipf\nzipfExponent: 0.5\n"},
		{"negative rate", "producerRate: -1\n"},
		{"bad duration", "duration: soon\n"},
		{"negative duration", "duration: -5s\n"},
		{"too many partitions", "topics: 10\npartitionsPerTopic: 20000\n"},
		{"too many clients", "producersPerTopic: 2000\n"},
		{"bad compression", "producer: {compression: brotli}\n"},
		{"idempotent needs acks all", "producer: {idempotent: true, acks: 1}\n"},
		{"bad consumer mode", "consumer: {mode: share}\n"},
		{"random ratio", "randomBytesRatio: 1.5\n"},
		{"payload pool too big", "messageSize: 1048576\nrandomizedPayloadPoolSize: 1000\n"},
		{"not yaml", "{{{"},
		{"backlog without consumers", "consumerBacklogSizeGB: 1\nsubscriptionsPerTopic: -1\n"},
		{"topic config key with =", "topicConfigs: {\"retention.bytes=1\": \"2\"}\n"},
		{"empty broker config key", "brokerConfigs: {\"\": \"1\"}\n"},
		{"min ISR twice", "minInsyncReplicas: 2\ntopicConfigs: {min.insync.replicas: \"2\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkload(strings.NewReader(tc.yaml))
			if !errors.Is(err, ErrWorkload) {
				t.Fatalf("err = %v, want ErrWorkload", err)
			}
		})
	}
}

func TestProducerOnlyWorkload(t *testing.T) {
	w, err := ParseWorkload(strings.NewReader("subscriptionsPerTopic: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.SubscriptionsPerTopic != 0 || w.Consumers() != 0 {
		t.Errorf("subscriptions %d", w.SubscriptionsPerTopic)
	}
	w, _ = ParseWorkload(strings.NewReader("name: x\n"))
	if w.SubscriptionsPerTopic != 1 {
		t.Errorf("default subscriptions %d", w.SubscriptionsPerTopic)
	}
}

func TestLoadWorkloadUnknown(t *testing.T) {
	if _, err := LoadWorkload("no-such-workload"); !errors.Is(err, ErrWorkload) {
		t.Fatalf("err = %v", err)
	}
}

func TestKeyPicker(t *testing.T) {
	w := &Workload{KeyDistributor: KeyZipf, KeySpace: 100, ZipfExponent: 1.5}
	keys := keyTable(w)
	kp := newKeyPicker(w, keys, 1)
	counts := map[string]int{}
	for i := 0; i < 10000; i++ {
		counts[string(kp.pick())]++
	}
	if counts["key-00000000"] < counts["key-00000050"]*5 {
		t.Errorf("zipf not skewed: first %d, middle %d", counts["key-00000000"], counts["key-00000050"])
	}
	w.KeyDistributor = KeyRoundRobin
	kp = newKeyPicker(w, keys, 1)
	for i := 0; i < 250; i++ {
		if got, want := string(kp.pick()), string(keys[i%100]); got != want {
			t.Fatalf("round robin %d: %s want %s", i, got, want)
		}
	}
	w.KeyDistributor = KeyNone
	if keyTable(w) != nil || newKeyPicker(w, nil, 1).pick() != nil {
		t.Error("none should produce no key")
	}
	if allocs := testing.AllocsPerRun(1000, func() { kp.pick() }); allocs != 0 {
		t.Errorf("pick allocates %v", allocs)
	}
}

func TestPayloads(t *testing.T) {
	w := &Workload{MessageSize: 100, RandomBytesRatio: 0.5, RandomizedPayloadPoolSize: 10}
	p := payloads(w, 7)
	if len(p) != 10 || len(p[0]) != 100 {
		t.Fatalf("pool shape %d×%d", len(p), len(p[0]))
	}
	for _, b := range p[0][50:] {
		if b != 0 {
			t.Fatal("non-random half not zero")
		}
	}
	if string(p[0][:50]) == string(p[1][:50]) {
		t.Error("payloads not distinct")
	}
}
