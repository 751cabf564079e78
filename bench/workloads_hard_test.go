package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// shortHard is a hard workload cut to a short run: a fixed 5,000 msg/s (a tenth of
// its rate, which this shared machine's loader cannot promise), no warmup.
func shortHard(t *testing.T, name string, d time.Duration) *Workload {
	t.Helper()
	w, err := LoadWorkload(name)
	if err != nil {
		t.Fatal(err)
	}
	w.ProducerRate, w.Warmup, w.Duration = 5000, 0, Duration(d)
	return w
}

// TestManyProducersKfake: the 64 producers' keyed records reach every one of the 100
// partitions and are all read back.
func TestManyProducersKfake(t *testing.T) {
	ctx := context.Background()
	tg, _ := startKfakeE2E(t)
	w := shortHard(t, "many-producers", 2*time.Second)
	// kfake serves every request on one goroutine of this test's process: at 5,000
	// msg/s, with other packages' tests on both cores (make test), its answers fell
	// behind the 64 producers' request timeouts, and their retries buried it (twice,
	// 74-148 s of timeouts, where the test alone takes 2 s). 1,000 msg/s for 2 s still
	// writes each of the 100 partitions about 20 records (none empty but with
	// probability about 2e-7).
	w.ProducerRate = 1000
	if w.Producers() != 64 || w.PartitionsPerTopic != 100 || w.KeyDistributor != KeyRandom || w.MessageSize != 1024 {
		t.Fatalf("many-producers: %+v", w)
	}
	r, err := Run(ctx, RunConfig{Workload: w, Brokers: tg.Brokers, Target: "kfake", TopicPrefix: "many", KeepTopics: true,
		DeliveryTimeout: 20 * time.Second, JoinTimeout: 15 * time.Second, DrainTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, onlyTopic(t, ctx, cl, "many"))
	if err != nil {
		t.Fatal(err)
	}
	var parts, empty int
	ends.Each(func(o kadm.ListedOffset) {
		parts++
		if o.Offset == 0 {
			empty++
		}
	})
	if parts != 100 || empty != 0 {
		t.Errorf("keyed records on %d of %d partitions, want all 100", parts-empty, parts)
	}
}

// onlyTopic is the one topic whose name begins with prefix.
func onlyTopic(t *testing.T, ctx context.Context, cl *kgo.Client, prefix string) string {
	t.Helper()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	if len(names) != 1 {
		t.Fatalf("topics %v, want one beginning %q", names, prefix)
	}
	return names[0]
}

// TestRetentionReachedKfake: the topic is created with the workload's
// retention.bytes and segment.bytes; kfake is not a samsa that samsa-bench starts, so
// the broker config is noted as not applied, and the retention note is there.
func TestRetentionReachedKfake(t *testing.T) {
	w := shortHard(t, "retention-reached", 2*time.Second)
	w.PartitionsPerTopic, w.ProducersPerTopic = 4, 8
	rs, err := Compare(context.Background(), CompareConfig{Workload: w, Targets: []string{TargetKfake}, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	checkCounts(t, r)
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"broker configs (--set log.retention.check.interval.ms=1000) were not applied", "retention: "} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// The created topic's configs, read back from the broker.
	tg, _ := startKfakeE2E(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := createTopics(context.Background(), cl, []string{"retention-configs"}, w); err != nil {
		t.Fatal(err)
	}
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), "retention-configs")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.bytes"] != "2097152" || got["segment.bytes"] != "1048576" {
		t.Errorf("topic configs retention.bytes %q segment.bytes %q", got["retention.bytes"], got["segment.bytes"])
	}
}

// TestRetentionReachedSamsa: against a spawned Samsa, given the workload's retention
// check interval, segments are deleted within the run (4 partitions at 5,000 msg/s of
// 1 KiB fill 3 MiB each in about 2.5 s) and every record acknowledged is read.
func TestRetentionReachedSamsa(t *testing.T) {
	bin := samsaBinary(t)
	w := shortHard(t, "retention-reached", 5*time.Second)
	w.PartitionsPerTopic, w.ProducersPerTopic = 4, 8
	rs, err := Compare(context.Background(), CompareConfig{Workload: w, Targets: []string{TargetSamsa}, Rounds: 1,
		Spawn: SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	checkCounts(t, r)
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "retention: segments deleted") || strings.Contains(notes, "were not applied") {
		t.Errorf("notes:\n%s", notes)
	}
}

// TestRetentionReachedSamsaCluster: the workload's retention check interval reaches
// every node of a samsa-cluster (`cluster start --set`): with 4 partitions led by
// two nodes, segments are deleted on all 4 within the run (at the default 5 minutes
// none would be), and no note says the broker configs were not applied.
func TestRetentionReachedSamsaCluster(t *testing.T) {
	bin := samsaBinary(t)
	w := shortHard(t, "retention-reached", 6*time.Second)
	w.PartitionsPerTopic, w.ProducersPerTopic = 4, 8
	rs, err := Compare(context.Background(), CompareConfig{Workload: w, Targets: []string{"samsa-cluster@nodes=2@rf=1"}, Rounds: 1,
		Spawn: SpawnOptions{SamsaBin: bin, WorkDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	checkCounts(t, r)
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "retention: segments deleted: the log start offset is above 0 on 4 of 4 partitions") || strings.Contains(notes, "were not applied") {
		t.Errorf("notes:\n%s", notes)
	}
}
